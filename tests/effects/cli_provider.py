"""A provider factory the CLI test names as ``tests.effects.cli_provider:make``."""

from __future__ import annotations

import os

from sqlalchemy import create_engine

from integrations.ledger.gateway import SandboxGateway


def make() -> SandboxGateway:
    """The sandbox gateway on $LEDGER_CLI_URL with prefix $LEDGER_CLI_PREFIX."""
    engine = create_engine(os.environ["LEDGER_CLI_URL"])
    return SandboxGateway(engine, table_prefix=os.environ["LEDGER_CLI_PREFIX"])
