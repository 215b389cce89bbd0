"""MkDocs hook: drop Sphinx roles from rendered docstrings.

The package's docstrings name objects the Sphinx way (``:class:`Inbox```),
which mkdocstrings renders as the literal role text before the code span
(``:class:Inbox``). The role adds nothing a reader needs, so the rendered
page keeps only the code span.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|exc|mod|obj|const):(?=<code>)")


def on_page_content(html: str, **_: Any) -> str:
    """The page's HTML without the role prefixes."""
    return _ROLE.sub("", html)
