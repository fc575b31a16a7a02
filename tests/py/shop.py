"""A small FastStream service, as a team running Python beside warren writes one.

    python shop.py spec               its AsyncAPI 3.0 document, as FastStream writes it
    python shop.py publish URL N NS   publishes N orders through its publisher, to the
                                      exchange named with the prefix NS (a test's namespace)

The warren tests import the document (`warren import asyncapi`) and run the generated Rust
consumer on what this service publishes.
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
    @broker.publisher("invoices")
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


def main() -> None:
    if sys.argv[1:2] == ["spec"]:
        broker, _ = service("amqp://guest:guest@127.0.0.1:5672/", "")
        spec = AsyncAPI(broker, title="Shop billing", version="2.1.0", schema_version="3.0.0")
        print(json.dumps(json.loads(spec.to_specification().to_json()), indent=2))
    elif sys.argv[1:2] == ["publish"]:
        _, url, count, namespace = sys.argv[1:]
        asyncio.run(publish(url, int(count), namespace))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
