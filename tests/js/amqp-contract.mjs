// amqp-contract 2.4's wire behaviour, spoken with amqplib (its own packages are not all
// installable from npm: @amqp-contract/core 2.4.0 is not published). Used by
// tests/broker/tests/shared_queues.rs.
//
//   node amqp-contract.mjs declare URL NAMESPACE
//
// `declare` asserts the topology of tests/broker/contracts/shared/ as amqp-contract's setup
// (core/src/setup.ts) asserts a contract's: durable topic exchanges, then quorum queues with
// `x-queue-type` and their dead-letter exchange and no `x-delivery-limit`, then bindings.
import amqp from "amqplib";

const [command, url, namespace] = process.argv.slice(2);
const name = (n) => `${namespace}${n}`;

async function declare(channel) {
  for (const exchange of ["orders", "orders.dlx"]) {
    await channel.assertExchange(name(exchange), "topic", { durable: true });
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
  await channel.bindQueue(name("orders.process"), name("orders"), "order.created");
  await channel.bindQueue(name("orders.dead"), name("orders.dlx"), "#");
}

const connection = await amqp.connect(url);
try {
  const channel = await connection.createConfirmChannel();
  if (command === "declare") {
    await declare(channel);
    console.log("declared");
  } else {
    throw new Error(`unknown command ${command}`);
  }
  await channel.close();
} finally {
  await connection.close();
}
