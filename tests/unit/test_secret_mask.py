"""``SecretMask``: configured secrets replaced in event payloads (JSON) and turn texts."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

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
