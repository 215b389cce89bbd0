"""Print size figures of the package: lines, modules, and the longest functions.

Usage: python scripts/layout_stats.py [PACKAGE_DIR]   (default: inboxguard)

Used to measure a restructuring before and after; it imports nothing from the
package, it only parses its files.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path


def functions(path: Path) -> list[tuple[int, str]]:
    """(length in lines, qualified name) of every function in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((child.end_lineno - child.lineno + 1, f"{path}:{name}"))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "inboxguard")
    files = sorted(p for p in root.rglob("*.py") if "migrations" not in p.parts)
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    funcs = sorted((f for p in files for f in functions(p)), reverse=True)
    lengths = [n for n, _ in funcs]
    print(f"modules: {len(files)}  lines: {sum(lines.values())}")
    print(f"largest module: {max(lines.values())} lines ({max(lines, key=lines.__getitem__)})")
    print(f"functions: {len(funcs)}  median length: {statistics.median(lengths)}")
    print(f"p90 length: {statistics.quantiles(lengths, n=10)[-1]:.0f}")
    print("longest functions:")
    for n, name in funcs[:8]:
        print(f"  {n:4d}  {name}")


if __name__ == "__main__":
    main()
