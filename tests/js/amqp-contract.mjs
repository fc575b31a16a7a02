// amqp-contract 2.4's wire behaviour, spoken with amqplib (its own packages are not all
// installable from npm: @amqp-contract/core 2.4.0 is not published). Used by
// tests/broker/tests/shared_queues.rs.
//
//   node amqp-contract.mjs declare URL NAMESPACE
//   node amqp-contract.mjs retry-copy URL NAMESPACE ORDER_ID RETRIES
//
// `declare` asserts the topology of tests/broker/contracts/shared/ as amqp-contract's setup
// (core/src/setup.ts) asserts a contract's: durable topic exchanges, then quorum queues with
// `x-queue-type` and their dead-letter exchange and no `x-delivery-limit`, then bindings.
//
// `retry-copy` sends what amqp-contract's ttl-backoff retry of order ORDER_ID brings back to
// `orders.process` after RETRIES failed attempts: the copy its worker stamped (the count, the
// last error, the first failure's time, the original routing key; the body byte for byte),
// arriving through its `retry-exchange`, routed by `x-retry-queue`, as its wait queue
// dead-letters it there when its TTL falls due.
import amqp from "amqplib";

const [command, url, namespace, ...rest] = process.argv.slice(2);
const name = (n) => `${namespace}${n}`;

async function declare(channel) {
  for (const exchange of ["orders", "orders.dlx"]) {
    await channel.assertExchange(name(exchange), "topic", { durable: true });
  }
  // Its retry machinery's: retried messages come back to their queue through it, routed by
  // the queue's name in `x-retry-queue`.
  await channel.assertExchange(name("retry-exchange"), "headers", { durable: true });
  await channel.assertQueue(name("orders.process"), {
    durable: true,
    arguments: {
      "x-queue-type": "quorum",
      "x-dead-letter-exchange": name("orders.dlx"),
    },
  });
  await channel.assertQueue(name("orders.dead"), {
    durable: true,
    arguments: { "x-queue-type": "quorum" },
  });
  await channel.bindQueue(name("orders.process"), name("orders"), "order.created");
  await channel.bindQueue(name("orders.dead"), name("orders.dlx"), "#");
  await channel.bindQueue(name("orders.process"), name("retry-exchange"), "", {
    "x-match": "all",
    "x-retry-queue": "orders.process",
  });
}

const connection = await amqp.connect(url);
try {
  const channel = await connection.createConfirmChannel();
  if (command === "declare") {
    await declare(channel);
    console.log("declared");
  } else if (command === "retry-copy") {
    const [orderId, retries] = rest;
    const body = Buffer.from(JSON.stringify({ orderId, amount: 100 }));
    channel.publish(name("retry-exchange"), "", body, {
      persistent: true,
      headers: {
        "x-retry-queue": "orders.process",
        "x-retry-count": Number(retries),
        "x-last-error": "payment service unavailable",
        "x-first-failure-timestamp": Date.now() - 60_000,
        "x-original-routing-key": "order.created",
      },
    });
    await channel.waitForConfirms();
    console.log("sent");
  } else {
    throw new Error(`unknown command ${command}`);
  }
  await channel.close();
} finally {
  await connection.close();
}
