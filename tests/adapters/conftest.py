"""Fixtures shared by the adapters' tests (``one_connection`` is in ``tests/conftest.py``)."""
