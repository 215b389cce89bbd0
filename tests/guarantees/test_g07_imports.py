"""G7: importing inboxguard imports no message framework."""

from __future__ import annotations

import subprocess
import sys


def test_g07_import_pulls_in_no_framework() -> None:
    """The core and every core module load without celery, dramatiq, kombu or redis."""
    code = (
        "import sys, pkgutil, importlib, inboxguard\n"
        "def walk(pkg):\n"
        "    for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if m.name.endswith(('.adapters', '.django', '.__main__', '.testing')):\n"
        "            continue\n"
        "        mod = importlib.import_module(m.name)\n"
        "        if m.ispkg:\n"
        "            walk(mod)\n"
        "walk(inboxguard)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in"
        " {'celery', 'dramatiq', 'kombu', 'redis', 'aio_pika', 'django', 'pytest'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""


def test_g07_every_public_name_is_exported_and_documented() -> None:
    """__all__ is sorted (constants, then classes, then functions, as ruff's
    isort-style rule orders them), importable, and each public name has a docstring."""
    import inboxguard

    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(inboxguard.__all__) == sorted(inboxguard.__all__, key=kind)
    for name in inboxguard.__all__:
        obj = getattr(inboxguard, name)
        assert (obj.__doc__ or "").strip(), name
