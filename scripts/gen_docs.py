"""Write the generated reference pages of the documentation site, or check that they are
current.

    python scripts/gen_docs.py            # regenerate docs/reference/{configuration,events,api}.md
    python scripts/gen_docs.py --check    # exit 1 when one differs (and say how)

The configuration page is read from the settings model (app/settings.py and the
*_settings.py modules), the events page from app/events, the API page from docs/openapi.json
(scripts/export_openapi.py writes it). A setting without a description stops the script: the
reference would not say what it does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
OPENAPI = ROOT / "docs" / "openapi.json"


def pages() -> dict[str, Callable[[], str]]:
    """Each generated page's file name (in docs/reference/) and how to make it."""
    for path in (str(ROOT), str(ROOT / "scripts")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from docpages import api, configuration, events  # noqa: PLC0415 - after the path is set

    from app.settings import Settings  # noqa: PLC0415

    return {
        "configuration.md": lambda: configuration.render(Settings),
        "events.md": events.render,
        "api.md": lambda: api.render(json.loads(OPENAPI.read_text())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail when a page is stale")
    parser.add_argument("--output", type=Path, default=REFERENCE, help="the pages' directory")
    args = parser.parse_args(argv)
    stale: list[str] = []
    for name, make in pages().items():
        target = args.output / name
        text = make()
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    if stale:
        print(
            f"{', '.join(stale)} stale: run python scripts/gen_docs.py and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
