import { useState } from "preact/hooks";

import type { Changes } from "@agent-gateway/client";

import { parseUnified } from "../diff";
import { describe, gateway } from "../gateway";
import { interruptedText, type EndItem, type Usage } from "../transcript";
import { useLive } from "./context";
import { DiffView } from "./DiffView";

const MINUS = "\u2212";

export function usageText(usage: Usage | null): string {
  if (!usage) return "";
  const tokens = (n: number): string => (n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n));
  let text = `${tokens(usage.input)} in · ${tokens(usage.output)} out tokens`;
  if (usage.cached) text += ` · ${tokens(usage.cached)} cached`;
  if (usage.cost !== null) text += ` · $${usage.cost.toFixed(4)}`;
  return text;
}

function ChangesPanel({ end }: { end: EndItem }) {
  const live = useLive();
  const [changes, setChanges] = useState<Changes | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [revert, setRevert] = useState<"idle" | "confirm" | "busy" | "done">("idle");
  const summary = end.changes;
  if (!summary || summary.files === 0) return null;

  async function load(open: boolean): Promise<void> {
    if (!open || changes) return;
    try {
      setChanges(await gateway().getChanges(live.id, { from: end.turnId, to: end.turnId }));
    } catch (caught) {
      setError(describe(caught));
    }
  }

  async function revertTurn(): Promise<void> {
    if (revert === "idle") return setRevert("confirm");
    setRevert("busy");
    try {
      await gateway().revertSession(live.id, { to_turn: end.turnId });
      setRevert("done");
    } catch (caught) {
      setError(describe(caught));
      setRevert("idle");
    }
  }

  const label = { idle: "Revert to before this turn", confirm: "Click again to revert the files", busy: "Reverting…", done: "Reverted" }[revert];
  return (
    <details class="changes" onToggle={(e) => void load(e.currentTarget.open)}>
      <summary>
        {summary.files} file(s) changed, +{summary.additions} {MINUS}
        {summary.deletions}
      </summary>
      {changes && (
        <>
          <ul class="changed-files">
            {changes.files.map((file) => (
              <li key={file.path}>
                <code>{file.path}</code> {file.status} · +{file.additions} {MINUS}
                {file.deletions}
              </li>
            ))}
          </ul>
          {parseUnified(changes.diff).map((diff, index) => (
            <DiffView key={index} diff={diff} />
          ))}
          {changes.diff_truncated && <p class="hint">The diff is cut short; the patch format has it whole.</p>}
        </>
      )}
      <button type="button" class="revert" disabled={revert === "busy" || revert === "done"} onClick={() => void revertTurn()}>
        {label}
      </button>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </details>
  );
}

function ForkButton({ turnId, onOpen }: { turnId: string; onOpen: (id: string) => void }) {
  const live = useLive();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  async function fork(): Promise<void> {
    setBusy(true);
    setError(null);
    try {
      const child = await gateway().forkSession(live.id, { at_turn: turnId });
      onOpen(child.id);
    } catch (caught) {
      setError(describe(caught));
    } finally {
      setBusy(false);
    }
  }
  return (
    <span class="turn-actions">
      <button type="button" class="link fork" disabled={busy} onClick={() => void fork()}>
        Fork from this turn
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}

/** The end of a turn: how it ended, what it used and changed, and what can follow. */
export function TurnEnd({ end, onOpen }: { end: EndItem; onOpen: (id: string) => void }) {
  if (end.status === "interrupted") {
    return (
      <div class="turn-end interrupted" data-seq={end.seq}>
        {interruptedText(end.reason)}.
      </div>
    );
  }
  if (end.status === "failed") {
    const error = end.error;
    return (
      <div class="turn-end failed" data-seq={end.seq} role="status">
        <p>
          <strong>Turn failed: {error?.kind ?? "unknown"}</strong>
          {error?.provider ? ` on ${error.provider}` : ""} · {error?.retryable ? "retryable" : "not retryable"}
        </p>
        {error?.message && <p class="failure-message">{error.message}</p>}
        {error?.reason && <p class="failure-reason">{error.reason}</p>}
        {error?.stderr_tail && (
          <details>
            <summary>The CLI's last output</summary>
            <pre class="tool-output">{error.stderr_tail}</pre>
          </details>
        )}
      </div>
    );
  }
  const usage = usageText(end.usage);
  return (
    <div class="turn-end completed" data-seq={end.seq}>
      <p class="turn-line">Turn completed{usage ? ` · ${usage}` : ""}.</p>
      <ChangesPanel end={end} />
      <ForkButton turnId={end.turnId} onOpen={onOpen} />
    </div>
  );
}
