// amqp-contract 2.4's wire behaviour, spoken with amqplib (its own packages are not all
// installable from npm: @amqp-contract/core 2.4.0 is not published). Used by
// tests/broker/tests/shared_queues.rs.
//
//   node amqp-contract.mjs declare URL NAMESPACE
//   node amqp-contract.mjs retry-copy URL NAMESPACE ORDER_ID RETRIES
//   node amqp-contract.mjs dead-letter URL NAMESPACE ORDER_ID:RETRIES...
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
//
// `dead-letter` makes amqp-contract's dead letters: each order is published to `orders` (with
// the headers its worker stamped on the last retry copy, when RETRIES is above 0), then taken
// from `orders.process` and rejected without requeue, as amqp-contract's worker does when it
// gives up (`nack(requeue=false)`, no reason of its own): the broker dead-letters it into
// `orders.dead`, with only its `x-death` to say why.
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
  } else if (command === "dead-letter") {
    const orders = rest.map((order) => order.split(":"));
    for (const [orderId, retries] of orders) {
      const body = Buffer.from(JSON.stringify({ orderId, amount: 100 }));
      const stamped = Number(retries) > 0
        ? {
            "x-retry-count": Number(retries),
            "x-last-error": `attempt ${retries} failed`,
            "x-first-failure-timestamp": Date.now() - 60_000,
            "x-original-routing-key": "order.created",
          }
        : {};
      channel.publish(name("orders"), "order.created", body, { persistent: true, headers: stamped });
    }
    await channel.waitForConfirms();
    for (let rejected = 0; rejected < orders.length; ) {
      const message = await channel.get(name("orders.process"), { noAck: false });
      if (message === false) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      channel.nack(message, false, false);
      rejected += 1;
    }
    console.log("rejected");
  } else {
    throw new Error(`unknown command ${command}`);
  }
  await channel.close();
} finally {
  await connection.close();
}
