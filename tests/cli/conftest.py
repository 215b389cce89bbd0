"""The CLI tests reuse the fixtures of the services they drive."""

from tests.effects.conftest import gateway, ledger  # noqa: F401
