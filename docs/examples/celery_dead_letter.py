"""The Celery dead-letter recipe on RabbitMQ: a refused task lands in <queue>.dead.

# needs: rabbitmq
The guard rejects a refused task (payload mismatch, too old) with
requeue=False; RabbitMQ moves it to the queue's dead-letter exchange, and
keeps it only if a queue is bound there. This script declares the recipe's
queues under a unique name, rejects one message the way the adapter does,
finds it in the dead-letter queue, and deletes what it declared.
"""

import os
import time
import uuid

from celery import Celery
from kombu import Exchange, Queue

BROKER_URL = os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@localhost//")
name = f"billing-{uuid.uuid4().hex[:8]}"

# --8<-- [start:recipe]
work_queue = Queue(
    name,
    Exchange(name, type="direct"),
    routing_key=name,
    queue_arguments={  # a rejected task goes to the dead-letter exchange ...
        "x-dead-letter-exchange": f"{name}.dlx",
        "x-dead-letter-routing-key": f"{name}.dead",
    },
)
# ... and RabbitMQ drops it there unless a queue is bound: declare this one yourself,
# Celery declares only the queues it consumes.
dead_letter_queue = Queue(
    f"{name}.dead", Exchange(f"{name}.dlx", type="direct"), routing_key=f"{name}.dead"
)

app = Celery("billing", broker=BROKER_URL)
app.conf.task_queues = [work_queue]
app.conf.task_default_queue = name
with app.connection_for_write() as conn:
    dead_letter_queue.bind(conn.default_channel).declare()
# --8<-- [end:recipe]

with app.connection_for_write() as conn:
    channel = conn.default_channel
    work_queue.bind(channel).declare()
    with conn.Producer(channel) as producer:
        producer.publish({"invoice": 7}, exchange=work_queue.exchange, routing_key=name)
    message = work_queue.bind(channel).get(no_ack=False)
    message.reject(requeue=False)  # what the adapter does with a refused task
    dead = dead_letter_queue.bind(channel)
    kept = None
    for _ in range(100):  # dead-lettering is asynchronous in the broker
        kept = dead.get(no_ack=True)
        if kept is not None:
            break
        time.sleep(0.05)
    assert kept is not None and kept.payload == {"invoice": 7}
    for queue in (work_queue, dead_letter_queue):
        queue.bind(channel).delete()
    for exchange in (work_queue.exchange, dead_letter_queue.exchange):
        exchange.bind(channel).delete()
