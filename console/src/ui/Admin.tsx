import { useEffect, useState } from "preact/hooks";

import type { Provider, UsageReport } from "@agent-gateway/client";

import { describe, gateway } from "../gateway";
import { useValue } from "../store";
import { BarChart } from "./Chart";
import { loadProviders, providers, readiness } from "./providers";

const RANGES = [
  ["1", "Last 24 hours"],
  ["7", "Last 7 days"],
  ["30", "Last 30 days"],
  ["90", "Last 90 days"],
] as const;
type GroupBy = "provider" | "model" | "key";

function pct(value: number | null | undefined): string {
  return value == null ? "–" : `${Math.round(value * 1000) / 10} %`;
}
function secs(value: number | null | undefined): string {
  return value == null ? "–" : `${Math.round(value * 10) / 10} s`;
}
function usd(value: number | null | undefined): string {
  return value == null ? "–" : `$${value.toFixed(value < 1 ? 4 : 2)}`;
}

/** The badge of each provider state: green, amber (a login away), red, grey. */
const BADGES = {
  available: "completed",
  needs_login: "waiting-for-you",
  unavailable: "failed",
  disabled: "",
} as const;

function ProviderRow({ provider }: { provider: Provider }) {
  const ready = readiness(provider);
  const f = provider.figures;
  return (
    <li data-provider={provider.name} data-state={ready.state} class={ready.ok ? "ok" : "down"}>
      <div class="provider-head">
        <strong>{provider.name}</strong>
        <span class={`badge provider-state ${BADGES[ready.state]}`}>{ready.text}</span>
      </div>
      {ready.fix && (
        <p class={`provider-fix ${ready.state}`}>
          {ready.state === "needs_login" ? "To log in: " : "To fix: "}
          {ready.fix}
        </p>
      )}
      <p class="provider-versions">
        {provider.installed_version ? `installed ${provider.installed_version}` : "not installed"}
        {provider.pinned_version ? ` · pinned ${provider.pinned_version}` : ""}
      </p>
      <dl class="figures">
        <div><dt>turns</dt><dd>{f.turns}</dd></div>
        <div><dt>running</dt><dd>{f.running}</dd></div>
        <div><dt>failure rate</dt><dd>{pct(f.failure_rate)}</dd></div>
        <div><dt>first text p50</dt><dd>{secs(f.first_text_p50_s)}</dd></div>
        <div><dt>turn p50</dt><dd>{secs(f.duration_p50_s)}</dd></div>
        <div><dt>cost / turn</dt><dd>{usd(f.cost_per_turn_usd)}</dd></div>
      </dl>
    </li>
  );
}

/** The admin view: usage by key, provider or model over a range, and each provider's figures. */
export function AdminView() {
  const list = useValue(providers);
  const [days, setDays] = useState("7");
  const [groupBy, setGroupBy] = useState<GroupBy>("provider");
  const [metric, setMetric] = useState<"tokens" | "cost" | "turns">("tokens");
  const [report, setReport] = useState<UsageReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [providerError, setProviderError] = useState<string | null>(null);
  const [checking, setChecking] = useState(false);

  useEffect(() => {
    void loadProviders().catch((caught) => setProviderError(describe(caught)));
  }, []);

  useEffect(() => {
    const to = new Date();
    const from = new Date(to.getTime() - Number(days) * 86_400_000);
    setError(null);
    gateway()
      .usage({ from: from.toISOString(), to: to.toISOString() })
      .then(setReport, (caught) => setError(describe(caught)));
  }, [days]);

  const totals = new Map<string, { tokens: number; cost: number; turns: number }>();
  for (const group of report?.groups ?? []) {
    const name = (groupBy === "key" ? group.key : groupBy === "model" ? group.model : group.provider) ?? "(none)";
    const entry = totals.get(name) ?? { tokens: 0, cost: 0, turns: 0 };
    entry.tokens += group.usage.input_tokens + group.usage.output_tokens;
    entry.cost += group.usage.cost_usd ?? 0;
    entry.turns += group.usage.turns;
    totals.set(name, entry);
  }
  const bars = [...totals.entries()]
    .map(([label, t]) => ({ label, value: t[metric] }))
    .sort((a, b) => b.value - a.value);
  const total = report?.total;

  async function checkNow(): Promise<void> {
    setChecking(true);
    try {
      await loadProviders(true);
      setProviderError(null);
    } catch (caught) {
      setProviderError(describe(caught));
    } finally {
      setChecking(false);
    }
  }

  return (
    <section class="admin" aria-labelledby="admin-title">
      <h2 id="admin-title">Usage and providers</h2>
      <section class="card" aria-labelledby="usage-title">
        <h3 id="usage-title">Usage</h3>
        <div class="filters">
          <label>
            Range
            <select value={days} onChange={(e) => setDays(e.currentTarget.value)}>
              {RANGES.map(([value, text]) => (
                <option key={value} value={value}>{text}</option>
              ))}
            </select>
          </label>
          <label>
            By
            <select value={groupBy} onChange={(e) => setGroupBy(e.currentTarget.value as GroupBy)}>
              <option value="provider">provider</option>
              <option value="model">model</option>
              <option value="key">key</option>
            </select>
          </label>
          <label>
            Show
            <select value={metric} onChange={(e) => setMetric(e.currentTarget.value as "tokens" | "cost" | "turns")}>
              <option value="tokens">tokens</option>
              <option value="cost">cost (USD)</option>
              <option value="turns">turns</option>
            </select>
          </label>
        </div>
        {error && <p class="error" role="alert">{error}</p>}
        {total && (
          <p class="usage-total" id="usage-total">
            {total.turns} turns · {total.input_tokens + total.output_tokens} tokens ({total.input_tokens} in, {total.output_tokens} out,{" "}
            {total.cached_input_tokens} cached) · {usd(total.cost_usd)}
          </p>
        )}
        {report && (bars.length > 0 ? <BarChart bars={bars} unit={metric} /> : <p class="hint">No turn ended in this range.</p>)}
      </section>
      <section class="card" aria-labelledby="providers-title">
        <div class="card-head">
          <h3 id="providers-title">Providers</h3>
          <button type="button" class="secondary" disabled={checking} onClick={() => void checkNow()}>
            {checking ? "Checking…" : "Check now"}
          </button>
        </div>
        {providerError && <p class="error" role="alert">{providerError}</p>}
        <ul id="providers" class="providers">
          {(list ?? []).map((p) => (
            <ProviderRow key={p.name} provider={p} />
          ))}
        </ul>
      </section>
    </section>
  );
}
