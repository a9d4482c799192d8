#!/usr/bin/env python3
"""Fail when a Python module is longer than its line budget.

Small modules with one concern each are how this code base stays readable (see
docs/contributing.md), so ``make lint`` holds the size: no module of ``app/``, ``scripts/``,
``docker/``, ``benchmarks/`` or ``clients/`` over 500 lines, no module of ``tests/`` over 600
(a test module repeats its setup more than code does). Lines are counted as the file has them:
blank lines, comments and docstrings included, because a reader scrolls past them too.

Exit status: 0 every module within its budget, 1 one or more over it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

BUDGETS: Mapping[str, int] = {
    "app": 500,
    "scripts": 500,
    "docker": 500,
    "benchmarks": 500,
    "clients": 500,
    "tests": 600,
}
"""The most lines a module may have, by the top-level directory it lives in."""

ADVICE = (
    "Split each module named above by concern: move a cohesive part (a family of types, one "
    "step of a pipeline, the tests of one behaviour) into a module of its own, and keep the "
    "old import names working by re-exporting them where callers expect them. Tests are split "
    "by what they test."
)


@dataclass(frozen=True, kw_only=True)
class Oversize:
    """A module longer than the budget of its directory."""

    path: Path
    lines: int
    limit: int

    def __str__(self) -> str:
        return f"{self.path}: {self.lines} lines, over the limit of {self.limit}"


def count_lines(path: Path) -> int:
    """The physical lines of a file (a last line without a newline counts)."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _modules(root: Path, directory: str) -> Iterator[Path]:
    base = root / directory
    if base.is_dir():
        yield from sorted(p for p in base.rglob("*.py") if p.is_file())


def oversized(root: Path, budgets: Mapping[str, int] = BUDGETS) -> list[Oversize]:
    """Every module under ``root`` longer than its directory's budget, in path order."""
    found: list[Oversize] = []
    for directory, limit in budgets.items():
        for path in _modules(root, directory):
            lines = count_lines(path)
            if lines > limit:
                found.append(Oversize(path=path.relative_to(root), lines=lines, limit=limit))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the repository to check (default: this one)",
    )
    args = parser.parse_args(argv)
    found = oversized(args.root)
    if not found:
        print("check_sizes: every module is within its line budget")
        return 0
    for item in found:
        print(item)
    print(f"check_sizes: {len(found)} module(s) over their line budget. {ADVICE}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
