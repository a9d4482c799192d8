"""Keys: the generated token, named keys, the root rule, the limiters and log redaction."""

from __future__ import annotations

import asyncio
import io
import logging
import stat
from pathlib import Path

import pytest

from app.api.gate import parse_origin
from app.api.ratelimits import KeyedBuckets
from app.api.security import (
    KeyRing,
    Principal,
    TokenFile,
    load_or_create_token,
    write_token_file,
)
from app.redaction import Redactor, SecretMask, install_log_redaction, secrets_of
from app.serve import root_refusal
from app.settings import ConfigError, load_settings


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


# --- keys, the root rule, the buckets and the log redactor (pure) ---------------------------

ADMIN_TOKEN = "admin-token-0123456789abcdefghijklmnopqrstuvwxyz"
ALICE = "alice-key-0123456789abcdefghijklmnopqrstuvwxyz"


def keyring() -> KeyRing:
    return KeyRing({"admin": (ADMIN_TOKEN, True), "alice": (ALICE, False)})


def test_t14_each_key_authenticates_as_its_own_principal() -> None:
    keys = keyring()
    assert keys.authenticate(ADMIN_TOKEN) == Principal(name="admin", admin=True)
    alice = keys.authenticate(ALICE)
    assert alice == Principal(name="alice", admin=False)
    assert alice is not None
    assert alice.owner_filter == "alice"
    assert Principal(name="admin", admin=True).owner_filter is None
    for wrong in ("", ALICE[:-1], ALICE + "x", ADMIN_TOKEN.upper(), " " + ALICE, "admin"):
        assert keys.authenticate(wrong) is None


def test_t14_the_admin_name_is_reserved_for_the_server_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="reserved"):
        load_settings(
            storage={"data_dir": str(tmp_path)},
            workspaces={"roots": [str(tmp_path)]},
            server={"api_keys": [{"name": "admin", "token": ALICE}]},
        )


@pytest.mark.parametrize(
    ("euid", "allow_root", "refused"),
    [(0, False, True), (0, True, False), (1000, False, False), (1000, True, False)],
)
def test_t1_root_is_refused_unless_allowed(euid: int, allow_root: bool, refused: bool) -> None:
    message = root_refusal(euid, allow_root=allow_root)
    assert (message is not None) == refused
    if message is not None:
        assert "server.allow_root = true" in message
        assert "GATEWAY_SERVER__ALLOW_ROOT" in message


def test_t13_a_bucket_refuses_past_its_capacity_and_refills_over_time() -> None:
    now = [100.0]
    buckets = KeyedBuckets(capacity=3, period_s=60.0, monotonic=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [None, None, None]
    wait = buckets.take("a")
    assert wait == pytest.approx(20.0)
    assert buckets.take("b") is None  # keys are apart
    now[0] += 19.0
    assert buckets.wait_s("a") == pytest.approx(1.0)
    now[0] += 1.0
    assert buckets.take("a") is None
    now[0] += 3600
    assert [buckets.take("a") for _ in range(4)][-1] is not None  # never above capacity


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("https://ok.example.com", ("https", "ok.example.com", 443)),
        ("http://localhost:5173", ("http", "localhost", 5173)),
        ("http://[::1]:8765", ("http", "::1", 8765)),
        ("https://ok.example.com.evil.com", ("https", "ok.example.com.evil.com", 443)),
        ("null", None),
        ("https://ok.example.com/", None),
        ("https://ok.example.com/path", None),
        ("https://user@ok.example.com", None),
        ("https://ok.example.com?", None),
        ("https://ok.example.com:99999", None),
        ("ftp://ok.example.com", None),
        ("https://", None),
        ("", None),
    ],
)
def test_t4_origins_are_parsed_exactly(value: str, parsed: tuple[str, str, int] | None) -> None:
    assert parse_origin(value) == parsed


SECRET_VALUE = "gateway-token-0123456789abcdefghij"


@pytest.mark.parametrize(
    "line",
    [
        f"GET /v1/x?access_token={SECRET_VALUE}&after=1",
        f"GET /v1/x?token={SECRET_VALUE}",
        f"Authorization: Bearer {SECRET_VALUE}",
        f"headers={{'authorization': 'Bearer {SECRET_VALUE}'}}",
        f"key is {SECRET_VALUE}.",
        "ANTHROPIC_API_KEY=sk-ant-api03-abcdefABCDEF0123456789_-xyz",
        "OPENAI_API_KEY=sk-proj-abcdefABCDEF0123456789",
        "bearer abc.def-ghi",
    ],
)
def test_t9_redactor_removes_whole_secret_values(line: str) -> None:
    redact = Redactor([SECRET_VALUE])
    cleaned = redact(line)
    assert "[redacted]" in cleaned
    for secret in (SECRET_VALUE, "sk-ant-api03", "abcdefABCDEF0123456789", "abc.def-ghi"):
        assert secret not in cleaned


def test_t9_every_log_record_is_redacted_including_arguments_and_tracebacks() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("test_t9_redaction")
    logger.addHandler(handler)
    logger.propagate = False
    uninstall = install_log_redaction(Redactor([SECRET_VALUE]))
    try:
        logger.warning("plain %s", SECRET_VALUE)
        logger.warning("access %s - %s %d", "127.0.0.1", f"/x?access_token={SECRET_VALUE}", 401)
        try:
            raise ValueError(f"bad key {SECRET_VALUE}")
        except ValueError:
            logger.exception("failed with %r", {"authorization": f"Bearer {SECRET_VALUE}"})
    finally:
        uninstall()
        logger.removeHandler(handler)
    logger.warning("after uninstall %s", "not redacted")
    text = stream.getvalue()
    assert SECRET_VALUE not in text
    assert "access 127.0.0.1 - /x?access_token=[redacted] 401" in text
    assert "ValueError: bad key [redacted]" in text


def test_t9_secrets_of_lists_keys_and_secret_looking_provider_variables(tmp_path: Path) -> None:
    settings = load_settings(
        storage={"data_dir": str(tmp_path)},
        workspaces={"roots": [str(tmp_path)]},
        server={"api_keys": [{"name": "alice", "token": ALICE}]},
        providers={
            "claude_code": {
                "env": {"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://127.0.0.1"}
            }
        },
    )
    found = secrets_of(settings, ADMIN_TOKEN)
    assert {ADMIN_TOKEN, ALICE, "sk-ant-x"} <= set(found)
    assert "http://127.0.0.1" not in found


async def test_t23_a_rotated_token_file_is_issued_to_the_mask_and_retires_its_watchers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "token"
    old = write_token_file(path)
    mask = SecretMask()
    token_file = TokenFile(path, old, issued=lambda token: mask.add([token]))
    keys = KeyRing({"alice": (ALICE, False)}, admin_file=token_file)
    retired = asyncio.Event()
    keys.watch(old, retired.set)
    keys.watch(ALICE, lambda: pytest.fail("a configured key never retires"))

    new = write_token_file(path)
    assert keys.authenticate(new) == Principal(name="admin", admin=True)
    await asyncio.wait_for(retired.wait(), timeout=5)
    assert keys.authenticate(old) is None
    assert mask.text(f"{new} {new.encode().hex()}") == "[redacted] [redacted]"
    # Opened with a token already replaced: retired at once.
    late = asyncio.Event()
    keys.watch(old, late.set)
    await asyncio.wait_for(late.wait(), timeout=5)
