"""Write the gateway's OpenAPI document to docs/openapi.json, or check that it is current.

    python scripts/export_openapi.py            # regenerate docs/openapi.json
    python scripts/export_openapi.py --check    # exit 1 when it differs (and say how)

The document is built by ``create_app`` with the default settings (``GATEWAY_*`` variables
and ``GATEWAY_CONFIG`` are ignored), pretty-printed with sorted keys, so it changes only
when the API does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "docs" / "openapi.json"
EXPORT_TOKEN = "openapi-export-" + "0" * 32


def build_document() -> dict[str, Any]:
    """The document ``GET /openapi.json`` serves on a gateway with default settings."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from app.main import create_app  # noqa: PLC0415 - after the path is set
    from app.settings import load_settings  # noqa: PLC0415

    for name in [n for n in os.environ if n.startswith("GATEWAY_")]:
        del os.environ[name]
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(
            environ={}, server={"token": EXPORT_TOKEN}, storage={"data_dir": data_dir}
        )
        document: dict[str, Any] = create_app(settings).openapi()
    return document


def render(document: dict[str, Any]) -> str:
    """The committed form: two-space indents, sorted keys, a final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail when the file is stale")
    parser.add_argument("--output", type=Path, default=DOCUMENT)
    args = parser.parse_args(argv)
    text = render(build_document())
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python scripts/export_openapi.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
