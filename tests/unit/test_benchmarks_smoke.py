"""The benchmark report renderer turns a run's JSON into the Markdown page; the benchmarks' own
clients speak their protocols right."""

from __future__ import annotations

from typing import Any

from benchmarks.acpreaders import client_frame
from benchmarks.report import render, table

SAMPLE: dict[str, Any] = {
    "command": "python -m benchmarks.run --quick --only throughput",
    "quick": True,
    "started_at": "2025-01-01T00:00:00+00:00",
    "load_start": [0.1, 0.2, 0.3],
    "load_end": [0.4, 0.5, 0.6],
    "seconds": 12.5,
    "client_loop": "uvloop",
    "machine": {
        "cpu": "Test CPU",
        "cores": 2,
        "ram_gib": 4.0,
        "kernel": "6.1",
        "os": "Linux",
        "python": "3.11.9",
        "packages": {"uvicorn": "0.35"},
        "clis": {"@anthropic-ai/claude-code": "2.1.330"},
        "commit": "abc1234",
    },
    "benchmarks": {
        "throughput": {
            "name": "throughput",
            "title": "1. Relay throughput",
            "measures": "Deltas per second to one SSE client.",
            "tables": [
                {
                    "title": "2000 deltas",
                    "rows": [
                        {"relay": "floor", "events/s": 90000.0, "x floor": 1.0},
                        {"relay": "gateway | disk", "events/s": 2500.5, "x floor": 0.028},
                    ],
                }
            ],
            "targets": [
                {"name": "throughput", "goal": ">= 0.3x floor", "value": "0.028x", "met": False}
            ],
            "notes": ["a note"],
            "seconds": 6.0,
        },
        "replay": {"name": "replay", "error": "Traceback: boom"},
    },
}


def test_render_lists_the_machine_targets_tables_and_failures() -> None:
    before = {**SAMPLE, "benchmarks": {"throughput": {**SAMPLE["benchmarks"]["throughput"]}}}
    before["benchmarks"]["throughput"]["targets"] = [
        {"name": "throughput", "goal": ">= 0.3x floor", "value": "0.003x", "met": False}
    ]
    middle = {**before, "label": "batched writes"}
    middle["benchmarks"] = {"throughput": {**before["benchmarks"]["throughput"]}}
    middle["benchmarks"]["throughput"]["targets"] = [
        {"name": "throughput", "goal": ">= 0.3x floor", "value": "0.01x", "met": False}
    ]
    page = render(SAMPLE, earlier=[before, middle], analysis="## Where the time goes\n\nsomewhere")

    assert page.startswith("# Benchmarks\n")
    assert "| CPU | Test CPU (2 cores) |" in page
    assert "start [0.1, 0.2, 0.3], end [0.4, 0.5, 0.6]" in page
    assert "| 1. Relay throughput | throughput | >= 0.3x floor | 0.028x | **missed** |" in page
    assert "| target | goal | run 1 | run 2 | now |  |" in page
    assert "| throughput | >= 0.3x floor | 0.003x | 0.01x | 0.028x | **missed** |" in page
    assert "; batched writes" in page
    assert "| gateway \\| disk | 2,500 | 0.028 |" in page
    assert "## Where the time goes" in page
    assert "Traceback: boom" in page


def test_table_takes_columns_in_order_of_first_appearance() -> None:
    lines = table([{"a": 1}, {"b": float("nan"), "a": None}])
    assert lines == ["| a | b |", "|---|---|", "| 1 | - |", "| - | - |"]


def test_the_raw_acp_reader_sends_masked_text_frames() -> None:
    for size in (5, 126, 70_000):
        text = "x" * (size - 1) + "é"
        frame = client_frame(text)
        assert frame[0] == 0x81  # FIN, text
        assert frame[1] & 0x80  # masked
        length, at = frame[1] & 0x7F, 2
        if length == 126:
            length, at = int.from_bytes(frame[2:4], "big"), 4
        elif length == 127:
            length, at = int.from_bytes(frame[2:10], "big"), 10
        mask, payload = frame[at : at + 4], frame[at + 4 :]
        assert length == len(payload) == len(text.encode())
        assert bytes(b ^ mask[i % 4] for i, b in enumerate(payload)).decode() == text
