"""``python -m inboxguard``: the command line."""

from __future__ import annotations

import sys

from inboxguard.cli import main

sys.exit(main())
