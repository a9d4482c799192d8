"""The line budget: an over-long module fails `make lint`, named with its count and limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_sizes.py"

sys.path.insert(0, str(SCRIPT.parent))
import check_sizes  # noqa: E402


def _write(root: Path, relative: str, lines: int) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n" * lines)


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_over_long_module_fails_named_with_its_count_and_the_limit(tmp_path: Path) -> None:
    _write(tmp_path, "app/long.py", 501)
    _write(tmp_path, "tests/unit/test_long.py", 601)
    _write(tmp_path, "app/fine.py", 500)
    result = _run(tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "app/long.py: 501 lines, over the limit of 500" in lines
    assert "tests/unit/test_long.py: 601 lines, over the limit of 600" in lines
    assert "fine.py" not in result.stdout
    assert "Split each module named above by concern" in result.stdout


def test_modules_within_their_budgets_pass(tmp_path: Path) -> None:
    _write(tmp_path, "app/fine.py", 500)
    _write(tmp_path, "scripts/tool.py", 500)
    _write(tmp_path, "tests/test_fine.py", 600)
    _write(tmp_path, "migrations/elsewhere.py", 900)  # outside the checked directories
    _write(tmp_path, "app/notes.txt", 900)  # not a Python module
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "within its line budget" in result.stdout


def test_every_line_counts_blank_and_docstring_and_an_unterminated_last_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.py"
    path.write_text('"""Doc."""\n\n\n# comment\nx = 1')
    assert check_sizes.count_lines(path) == 5
    path.write_text("")
    assert check_sizes.count_lines(path) == 0


def test_benchmarks_and_docker_hold_the_code_budget(tmp_path: Path) -> None:
    _write(tmp_path, "benchmarks/long.py", 501)
    _write(tmp_path, "docker/long.py", 501)
    found = {str(item.path): item.lines for item in check_sizes.oversized(tmp_path)}
    assert found == {"benchmarks/long.py": 501, "docker/long.py": 501}
