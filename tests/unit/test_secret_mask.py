"""``SecretMask``: configured secrets replaced in event payloads (JSON) and turn texts."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.masking import WATCH_EVERY_S
from app.redaction import REDACTED, SecretMask

KEY = "sk-live-0123456789abcdef"


def test_a_secret_is_replaced_wherever_it_stands_in_a_json_document() -> None:
    mask = SecretMask([KEY])
    encoded = json.dumps({"output": f"ANTHROPIC_API_KEY={KEY}\nPATH=/bin", "nested": [KEY]})
    masked = json.loads(mask.json(encoded))
    assert masked == {"output": f"ANTHROPIC_API_KEY={REDACTED}\nPATH=/bin", "nested": [REDACTED]}


def test_a_secret_with_characters_json_escapes_is_found_in_both_spellings() -> None:
    secret = 'pass"wörd\\tail-1234'
    mask = SecretMask([secret])
    for ensure_ascii in (True, False):
        encoded = json.dumps({"text": f"x {secret} y"}, ensure_ascii=ensure_ascii)
        assert json.loads(mask.json(encoded)) == {"text": f"x {REDACTED} y"}


def test_short_or_numeric_values_are_not_masked() -> None:
    mask = SecretMask(["short", "12345678901", ""])
    assert not mask
    document = json.dumps({"exit_code": 12345678901, "text": "short"})
    assert mask.json(document) == document


def test_texts_and_json_like_values_are_masked() -> None:
    mask = SecretMask([KEY, "other-secret-value"])
    assert mask.text(f"key {KEY}!") == f"key {REDACTED}!"
    value = {"kind": "auth", "message": f"401 for {KEY}", "n": 3, "more": ["other-secret-value"]}
    assert mask.values(value) == {
        "kind": "auth",
        "message": f"401 for {REDACTED}",
        "n": 3,
        "more": [REDACTED],
    }


@given(
    st.recursive(
        st.text() | st.integers() | st.booleans(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_a_masked_document_is_still_json_without_the_secret(value: object) -> None:
    mask = SecretMask([KEY])
    document = json.dumps({"before": value, "secret": KEY, "after": [value, KEY]})
    masked = mask.json(document)
    assert KEY not in json.dumps(json.loads(masked))


# Encoded forms: a secret quoted as base64, hex or percent-encoding is the secret all the same.

ENCODED_KEY = "sk-proj-Zy0_secret+/value~ü"
"""Characters that base64's two alphabets, percent-encoding and JSON each spell their own way."""


def encodings(data: bytes) -> list[str]:
    """``data`` in base64 (both alphabets, padded and not), hex (both cases)."""
    texts = [data.hex(), data.hex().upper()]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        padded = encode(data).decode()
        texts += [padded, padded.rstrip("=")]
    return texts


@pytest.mark.parametrize("before", [b"", b"a", b"ab", b"abc", b"abcd"])
@pytest.mark.parametrize("after", [b"", b"z", b"yz", b"xyz"])
def test_base64_and_hex_of_a_secret_are_masked_at_every_alignment(
    before: bytes, after: bytes
) -> None:
    mask = SecretMask([ENCODED_KEY])
    secret = ENCODED_KEY.encode()
    for encoded in encodings(before + secret + after):
        for masked in (mask.text(f"got {encoded}."), mask.json(json.dumps({"t": encoded}))):
            assert REDACTED in masked, encoded
            assert not _carries(masked, secret), (encoded, masked)


def _carries(masked: str, secret: bytes) -> bool:
    """Whether some base64 or hex run left in ``masked`` still decodes to a part of the
    secret longer than a third of it (the characters at its edges carry a few of its bits)."""
    for run in re.findall(r"[A-Za-z0-9+/_-]{4,}", masked):
        run_bytes = run.translate(str.maketrans("-_", "+/"))
        for start in range(4):
            chunk = run_bytes[start:]
            chunk = chunk[: len(chunk) // 4 * 4]
            with contextlib.suppress(ValueError):
                if _shares(base64.b64decode(chunk), secret):
                    return True
        with contextlib.suppress(ValueError):
            for start in range(2):
                if _shares(bytes.fromhex(run[start : start + (len(run) - start) // 2 * 2]), secret):
                    return True
    return False


def _shares(decoded: bytes, secret: bytes) -> bool:
    third = len(secret) // 3
    return any(secret[i : i + third] in decoded for i in range(len(secret) - third + 1))


def test_percent_encoded_forms_of_a_secret_are_masked() -> None:
    mask = SecretMask([ENCODED_KEY])
    spelled = [
        urllib.parse.quote(ENCODED_KEY, safe=""),
        urllib.parse.quote(ENCODED_KEY),
        urllib.parse.quote_plus(ENCODED_KEY),
        re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(ENCODED_KEY)),
    ]
    for text in spelled:
        assert mask.text(f"GET /v1?key={text}&x=1") == f"GET /v1?key={REDACTED}&x=1", text
        query = json.dumps({"url": f"https://x.invalid/?key={text}"})
        assert json.loads(mask.json(query)) == {"url": f"https://x.invalid/?key={REDACTED}"}


def test_a_match_never_cuts_a_json_escape_in_two() -> None:
    # The base64 text right after an escape begins with a character the secret allows
    # there: the escape is masked with it rather than cut, and the document stays JSON.
    mask = SecretMask([KEY])
    for before in ("\n", "é", "\\", '"', "\u2028"):
        for alignment in ("", "a", "ab"):
            encoded = base64.b64encode((alignment + before).encode() + KEY.encode()).decode()
            for ensure_ascii in (True, False):
                document = json.dumps({"t": before + encoded}, ensure_ascii=ensure_ascii)
                masked = json.loads(mask.json(document))["t"]
                assert REDACTED in masked


def test_a_secret_added_later_is_masked_from_then_on_and_the_old_ones_stay() -> None:
    mask = SecretMask([KEY])
    later = "rotated-token-abcdefghijklmnop"
    assert mask.text(later) == later
    assert mask.add([later])
    assert not mask.add([later])
    shown = f"{KEY} {later} {later.encode().hex()}"
    assert mask.text(shown) == f"{REDACTED} {REDACTED} {REDACTED}"


def test_a_watch_runs_before_a_use_once_a_millisecond_and_may_add_a_secret() -> None:
    now = [100.0]
    mask = SecretMask(monotonic=lambda: now[0])
    issued: list[str] = []
    checks: list[float] = []

    def check() -> None:
        checks.append(now[0])
        mask.add(issued)

    mask.watch(check)
    assert not mask
    issued.append("issued-after-start-0123456789")
    assert mask.text("x issued-after-start-0123456789 y") == "x issued-after-start-0123456789 y"
    now[0] += WATCH_EVERY_S
    assert mask.text("x issued-after-start-0123456789 y") == f"x {REDACTED} y"
    assert checks == [100.0, 100.0 + WATCH_EVERY_S]


def test_many_secrets_are_masked_in_one_pass_over_a_long_text() -> None:
    # One compiled pattern for every form of every secret: the time grows with the text, not
    # with the text times the forms (a check of the structure, not a timing).
    secrets = [f"secret-number-{n:04d}-abcdefgh" for n in range(200)]
    mask = SecretMask(secrets)
    text = " ".join(secrets[::7]) + " plain " * 1000
    masked = mask.text(text)
    assert not any(s in masked for s in secrets)
    assert masked.count(REDACTED) == len(secrets[::7])
