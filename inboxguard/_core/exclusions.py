"""Excluded payload fields: dotted paths, or tuples of keys for keys with dots."""

from __future__ import annotations

from collections.abc import Iterable

from inboxguard._core.canonical import Exclusions
from inboxguard.errors import PayloadEncodingError

__all__ = ["ExcludePath", "compile_exclusions"]

#: One excluded field: ``"meta.sent_at"``, or ``("meta", "sent.at")`` when a
#: key itself contains a dot.
ExcludePath = str | tuple[str, ...]


def compile_exclusions(paths: Iterable[ExcludePath] | str) -> Exclusions:
    """Turn excluded paths into the tree the walker reads.

    A path segment that meets a list applies to every element.

    Raises:
        PayloadEncodingError: a path is empty, has an empty segment, or is
            neither a str nor a tuple of str.
    """
    if isinstance(paths, str):
        paths = (paths,)
    tree: Exclusions = {}
    for path in paths:
        _add(tree, _segments(path))
    return tree


def _segments(path: object) -> tuple[str, ...]:
    if isinstance(path, str):
        parts = tuple(path.split("."))
    elif isinstance(path, tuple) and all(type(part) is str for part in path):
        parts = path
    else:
        parts = ()
    if not parts or any(not part for part in parts):
        msg = (
            f"exclude path {path!r} is not a dotted field path such as 'meta.sent_at'"
            " (or a tuple of keys such as ('meta', 'sent.at') when a key contains a dot)"
        )
        raise PayloadEncodingError(msg, path="exclude")
    return parts


def _add(tree: Exclusions, parts: tuple[str, ...]) -> None:
    node = tree
    *parents, leaf = parts
    for part in parents:
        if part in node and node[part] is None:
            return  # a shorter path already excludes this subtree
        child = node.setdefault(part, {})
        assert child is not None  # checked just above
        node = child
    node[leaf] = None
