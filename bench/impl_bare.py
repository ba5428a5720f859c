"""The ceiling: a bare consume -> produce passthrough with confluent-kafka, no state, no
decoding, at-least-once (batched consume, async offset commits).

    python bench/impl_bare.py BOOTSTRAP IN_TOPIC OUT_TOPIC
"""

from __future__ import annotations

import signal
import sys

from confluent_kafka import Consumer, Producer


def main() -> None:
    bootstrap, in_topic, out_topic = sys.argv[1:4]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-bare", "auto.offset.reset": "earliest",
                         "enable.auto.commit": True, "auto.commit.interval.ms": 1000})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    consumer.subscribe([in_topic])
    while running:
        for msg in consumer.consume(1000, 0.5):
            if msg.error():
                continue
            while True:
                try:
                    producer.produce(out_topic, key=msg.key(), value=msg.value())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    producer.flush(10)
    consumer.close()


if __name__ == "__main__":
    main()
