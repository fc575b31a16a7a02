// amqp-contract 2.4's wire behaviour, spoken with amqplib (its own packages are not all
// installable from npm: @amqp-contract/core 2.4.0 is not published). Used by
// tests/broker/tests/shared_queues.rs, on the topology of tests/broker/contracts/shared/.
//
//   node amqp-contract.mjs declare URL NAMESPACE
//   node amqp-contract.mjs retry-copy URL NAMESPACE ORDER_ID RETRIES
//   node amqp-contract.mjs dead-letter URL NAMESPACE ORDER_ID:RETRIES...
//   node amqp-contract.mjs worker URL NAMESPACE
//
// `declare` asserts the topology as amqp-contract's setup (core/src/setup.ts) asserts a
// contract's: durable topic exchanges, then quorum queues with `x-queue-type` and their
// dead-letter exchange and no `x-delivery-limit`, then bindings; and for its ttl-backoff queue
// its retry machinery: the headers exchanges `wait-exchange` and `retry-exchange`, and one
// wait queue, `orders.process-wait`, which dead-letters into `retry-exchange`, bound back to
// the queue by `x-retry-queue`.
//
// `retry-copy` sends what amqp-contract's retry of order ORDER_ID brings back to
// `orders.process` after RETRIES failed attempts: the copy its worker stamped (the count, the
// last error, the first failure's time, the original routing key; the body byte for byte),
// arriving through `retry-exchange`, as its wait queue dead-letters it there.
//
// `dead-letter` makes amqp-contract's dead letters: each order is published to `orders` (with
// the headers its worker stamped on the last retry copy, when RETRIES is above 0), then taken
// from `orders.process` and rejected without requeue, as amqp-contract's worker does when it
// gives up (`nack(requeue=false)`, no reason of its own): the broker dead-letters it into
// `orders.dead`, with only its `x-death` to say why.
//
// `worker` runs amqp-contract's worker on `orders.process` until stdin closes: every order
// fails retryably; below the budget of 3 (`x-retry-count`, trusted as amqp-contract trusts it)
// a copy goes to its wait queue for 200 ms with the count stamped, then the original is acked;
// at the budget, `nack(requeue=false)`. It prints `attempt ORDER_ID COUNT` for each delivery.
import amqp from "amqplib";

const [command, url, namespace, ...rest] = process.argv.slice(2);
const name = (n) => `${namespace}${n}`;
const MAX_RETRIES = 3;

async function declare(channel) {
  for (const exchange of ["orders", "orders.dlx"]) {
    await channel.assertExchange(name(exchange), "topic", { durable: true });
  }
  for (const exchange of ["wait-exchange", "retry-exchange"]) {
    await channel.assertExchange(name(exchange), "headers", { durable: true });
  }
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
  await channel.assertQueue(name("orders.process-wait"), {
    durable: true,
    arguments: {
      "x-queue-type": "quorum",
      "x-dead-letter-exchange": name("retry-exchange"),
    },
  });
  await channel.bindQueue(name("orders.process"), name("orders"), "order.created");
  await channel.bindQueue(name("orders.dead"), name("orders.dlx"), "#");
  await channel.bindQueue(name("orders.process-wait"), name("wait-exchange"), "", {
    "x-match": "all",
    "x-wait-queue": "orders.process-wait",
  });
  await channel.bindQueue(name("orders.process"), name("retry-exchange"), "", {
    "x-match": "all",
    "x-retry-queue": "orders.process",
  });
}

// The headers amqp-contract's `publishForRetry` stamps on a retry copy.
function stamped(headers, count, error, routingKey) {
  return {
    ...headers,
    "x-retry-count": count,
    "x-last-error": error,
    "x-first-failure-timestamp": headers["x-first-failure-timestamp"] ?? Date.now(),
    "x-original-routing-key": headers["x-original-routing-key"] ?? routingKey,
  };
}

async function worker(channel) {
  await channel.prefetch(1);
  await channel.consume(name("orders.process"), async (message) => {
    if (message === null) return;
    const headers = message.properties.headers ?? {};
    const count = Number(headers["x-retry-count"] ?? 0);
    const { orderId } = JSON.parse(message.content.toString());
    console.log(`attempt ${orderId} ${count}`);
    if (count >= MAX_RETRIES) {
      channel.nack(message, false, false);
      return;
    }
    const copy = stamped(headers, count + 1, "payment service unavailable", message.fields.routingKey);
    copy["x-wait-queue"] = "orders.process-wait";
    copy["x-retry-queue"] = "orders.process";
    channel.publish(name("wait-exchange"), "", message.content, {
      ...message.properties,
      headers: copy,
      expiration: "200",
    });
    await channel.waitForConfirms();
    channel.ack(message);
  });
  console.log("consuming");
  await new Promise((resolve) => {
    process.stdin.on("end", resolve);
    process.stdin.on("close", resolve);
    process.stdin.resume();
  });
}

async function deadLetters(channel) {
  const orders = rest.map((order) => order.split(":"));
  for (const [orderId, retries] of orders) {
    const body = Buffer.from(JSON.stringify({ orderId, amount: 100 }));
    const headers =
      Number(retries) > 0 ? stamped({}, Number(retries), `attempt ${retries} failed`, "order.created") : {};
    channel.publish(name("orders"), "order.created", body, { persistent: true, headers });
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
}

async function retryCopy(channel) {
  const [orderId, retries] = rest;
  const body = Buffer.from(JSON.stringify({ orderId, amount: 100 }));
  const headers = stamped({}, Number(retries), "payment service unavailable", "order.created");
  headers["x-first-failure-timestamp"] = Date.now() - 60_000;
  headers["x-retry-queue"] = "orders.process";
  channel.publish(name("retry-exchange"), "", body, { persistent: true, headers });
  await channel.waitForConfirms();
  console.log("sent");
}

const connection = await amqp.connect(url);
try {
  const channel = await connection.createConfirmChannel();
  const commands = { declare, worker, "dead-letter": deadLetters, "retry-copy": retryCopy };
  if (!(command in commands)) throw new Error(`unknown command ${command}`);
  await commands[command](channel);
  if (command === "declare") console.log("declared");
  await channel.close();
} finally {
  await connection.close();
}
