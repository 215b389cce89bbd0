"""A provider factory the CLI test names as ``tests.effects.cli_provider:make``."""

from __future__ import annotations

import datetime as dt
import os

from sqlalchemy import create_engine

from integrations.ledger.gateway import SandboxGateway


def make() -> SandboxGateway:
    """The sandbox gateway on $LEDGER_CLI_URL with prefix $LEDGER_CLI_PREFIX."""
    engine = create_engine(os.environ["LEDGER_CLI_URL"])
    return SandboxGateway(engine, table_prefix=os.environ["LEDGER_CLI_PREFIX"])


def make_without_lookup() -> SandboxGateway:
    """The same gateway declaring no lookup and a one-second idempotency window,
    so an unknown effect older than a second can only be settled by an operator."""
    engine = create_engine(os.environ["LEDGER_CLI_URL"])
    return SandboxGateway(
        engine,
        table_prefix=os.environ["LEDGER_CLI_PREFIX"],
        window=dt.timedelta(seconds=1),
        supports_lookup=False,
    )
