"""The bearer token: generated once into a private file, then reused."""

from __future__ import annotations

import stat
from pathlib import Path

from app.api.security import load_or_create_token


def test_token_is_generated_once_with_mode_600_and_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    token, generated = load_or_create_token(None, data_dir)
    assert generated
    assert len(token) >= 40  # 32 random bytes, url-safe
    mode = stat.S_IMODE((data_dir / "token").stat().st_mode)
    assert mode == 0o600
    again, generated_again = load_or_create_token(None, data_dir)
    assert (again, generated_again) == (token, False)


def test_a_configured_token_wins_and_writes_nothing(tmp_path: Path) -> None:
    token, generated = load_or_create_token("configured-token-value", tmp_path)
    assert (token, generated) == ("configured-token-value", False)
    assert not (tmp_path / "token").exists()


def test_a_short_or_empty_token_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("short\n")
    token, generated = load_or_create_token(None, tmp_path)
    assert generated
    assert token != "short"
    assert (tmp_path / "token").read_text().strip() == token
