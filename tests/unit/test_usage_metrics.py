"""The token and cost counters: one ended turn's usage by provider, model and kind."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.events import Usage
from app.observability.metrics import MAX_MODEL_LABELS, OTHER_MODEL, GatewayMetrics


def samples(metrics: GatewayMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for sample in family.samples
        if sample.name in {"agent_gateway_tokens_total", "agent_gateway_cost_usd_total"}
    }


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def test_a_turns_tokens_and_cost_are_added_by_kind() -> None:
    metrics = GatewayMetrics()
    usage = Usage(input_tokens=12, output_tokens=7, cached_input_tokens=3, cost_usd=0.25)
    metrics.count_usage(provider="claude_code", model=None, usage=usage)
    metrics.count_usage(provider="claude_code", model=None, usage=usage)
    labels = {"provider": "claude_code", "model": "default"}
    assert samples(metrics) == {
        key("agent_gateway_tokens_total", **labels, kind="input"): 24,
        key("agent_gateway_tokens_total", **labels, kind="output"): 14,
        key("agent_gateway_tokens_total", **labels, kind="cached_input"): 6,
        key("agent_gateway_cost_usd_total", **labels): 0.5,
    }


def test_models_past_the_cap_are_counted_as_other() -> None:
    metrics = GatewayMetrics()
    one = Usage(input_tokens=1)
    for n in range(MAX_MODEL_LABELS + 5):
        metrics.count_usage(provider="codex", model=f"m{n}", usage=one)
    metrics.count_usage(provider="codex", model="m0", usage=one)  # a known one stays itself
    models = {
        dict(labels)["model"]
        for name, labels in samples(metrics)
        if name == "agent_gateway_tokens_total"
    }
    assert len(models) == MAX_MODEL_LABELS + 1
    assert OTHER_MODEL in models
    inputs = key("agent_gateway_tokens_total", provider="codex", model=OTHER_MODEL, kind="input")
    assert samples(metrics)[inputs] == 5
    m0 = key("agent_gateway_tokens_total", provider="codex", model="m0", kind="input")
    assert samples(metrics)[m0] == 2
