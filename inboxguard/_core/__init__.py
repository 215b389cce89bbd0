"""The pure core: standard library only.

Identities, digests, the clock, the header vocabulary, outcome dispositions,
the retention policy and the configuration checks that every service shares.
Nothing here imports SQLAlchemy or a framework; every layer above may import it.
"""
