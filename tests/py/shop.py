"""A small FastStream service, as a team running Python beside warren writes one.

    python shop.py spec               its AsyncAPI 3.0 document, as FastStream writes it
    python shop.py publish URL N NS   publishes N orders through its publisher, then one
                                      its schema refuses (a negative total), to the exchange
                                      named with the prefix NS (a test's namespace)
    python shop.py serve URL NS       runs its billing subscriber, which answers each order
                                      with an invoice to the queue NS + "invoices"; prints
                                      "ready" once it consumes, and stops when stdin closes

The warren tests import the document (`warren import asyncapi`), run the generated Rust
consumer on what this service publishes, and publish with the generated Rust publisher to
this service's subscriber.
"""

import asyncio
import json
import sys

from pydantic import BaseModel, Field
from faststream.rabbit import ExchangeType, RabbitBroker, RabbitExchange, RabbitQueue
from faststream.specification import AsyncAPI


class OrderPlaced(BaseModel):
    order_id: str = Field(..., description="The order's id")
    total_cents: int = Field(..., ge=0)
    note: str | None = None


class Invoice(BaseModel):
    order_id: str
    amount: int


def service(url: str, namespace: str):
    """The service's broker, with its publisher and its subscriber."""
    broker = RabbitBroker(url)
    orders = RabbitExchange(f"{namespace}shop.orders", type=ExchangeType.TOPIC, durable=True)
    billing = RabbitQueue(f"{namespace}shop.billing", durable=True, routing_key="order.*")
    place_order = broker.publisher(
        exchange=orders, routing_key="order.placed", schema=OrderPlaced, title="place_order"
    )

    @broker.subscriber(billing, orders)
    @broker.publisher(f"{namespace}invoices")
    async def bill(order: OrderPlaced) -> Invoice:
        return Invoice(order_id=order.order_id, amount=order.total_cents)

    return broker, place_order


async def publish(url: str, count: int, namespace: str) -> None:
    broker, place_order = service(url, namespace)
    async with broker:
        for i in range(count):
            note = f"note {i}" if i % 2 else None
            await place_order.publish(
                OrderPlaced(order_id=f"o-{i}", total_cents=100 * i, note=note)
            )
        # FastStream validates what it consumes, not what it publishes: a dict goes out as it is.
        await place_order.publish({"order_id": "o-invalid", "total_cents": -1})


async def serve(url: str, namespace: str) -> None:
    broker, _ = service(url, namespace)
    async with broker:
        await broker.start()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main() -> None:
    if sys.argv[1:2] == ["spec"]:
        broker, _ = service("amqp://guest:guest@127.0.0.1:5672/", "")
        spec = AsyncAPI(broker, title="Shop billing", version="2.1.0", schema_version="3.0.0")
        print(json.dumps(json.loads(spec.to_specification().to_json()), indent=2))
    elif sys.argv[1:2] == ["publish"]:
        _, url, count, namespace = sys.argv[1:]
        asyncio.run(publish(url, int(count), namespace))
    elif sys.argv[1:2] == ["serve"]:
        _, url, namespace = sys.argv[1:]
        asyncio.run(serve(url, namespace))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
