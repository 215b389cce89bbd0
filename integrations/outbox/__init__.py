"""Reference app for the outbox: a producer that commits orders with outbox
rows, dispatchers that deliver them with kombu, and an inbox-guarded kombu
consumer that ships each order exactly once."""
