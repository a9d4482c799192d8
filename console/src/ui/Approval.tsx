import { useState } from "preact/hooks";

import { describe, gateway, GatewayError } from "../gateway";
import type { ApprovalItem } from "../transcript";
import { focusPrompt, useLive } from "./context";

const DEFAULT_OPTIONS = [
  { decision: "allow", label: "Allow" },
  { decision: "deny", label: "Deny" },
];
const BUTTON_NAMES: Record<string, string> = {
  allow: "Allow",
  deny: "Deny",
  allow_session: "Allow for this session",
};

export function resolutionText(approval: ApprovalItem): string {
  const data = approval.resolved;
  if (!data) return "";
  const verdict = data.decision === "deny" ? "Denied" : "Allowed";
  const why = data.reason === "decided" ? `by the ${data.by}` : data.reason.replace(/_/g, " ");
  const said = data.message ? `: ${data.message}` : "";
  // An edited input is what runs: whoever answered must see it.
  const edited = data.updated_input
    ? `; input edited by ${data.updated_by ?? "the client"} to ${JSON.stringify(data.updated_input)}`
    : "";
  return `${verdict} (${why})${said}${edited}`;
}

/** Sends one decision; a refusal is shown on the card (a 409: answered elsewhere meanwhile). */
export async function decide(
  sessionId: string,
  approvalId: string,
  decision: string,
  message: string,
): Promise<string | null> {
  try {
    const body: { decision: "allow" | "deny" | "allow_session"; message?: string } = {
      decision: decision as "allow" | "deny" | "allow_session",
    };
    if (message.trim()) body.message = message.trim();
    await gateway().respondToApproval(sessionId, approvalId, body);
    focusPrompt();
    return null;
  } catch (error) {
    if (error instanceof GatewayError && error.status === 409) return `${describe(error)}`;
    return describe(error);
  }
}

/** The approval on its tool card: the diff or command is above it, the decision here. */
export function ApprovalPanel({ approval }: { approval: ApprovalItem }) {
  const live = useLive();
  const [message, setMessage] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const resolved = approval.resolved;
  const state = resolved ? (resolved.decision === "deny" ? "denied" : "allowed") : "pending";
  const options = approval.options.length > 0 ? approval.options : DEFAULT_OPTIONS;
  const inputId = `approval-message-${approval.id}`;

  async function answer(decision: string): Promise<void> {
    setBusy(true);
    setError(null);
    const refused = await decide(live.id, approval.id, decision, message);
    setError(refused);
    setBusy(refused === null);
  }

  return (
    <div class={`approval ${state}`} data-seq={approval.seq} data-approval-id={approval.id} role="group" aria-label={`Approval for ${approval.tool}`}>
      {resolved ? (
        <p class="resolution">
          <span data-seq={approval.resolvedSeq ?? undefined}>{resolutionText(approval)}</span>
        </p>
      ) : (
        <>
          <p class="approval-title">
            <strong>Allow {approval.tool}?</strong>
            {approval.title && <span class="approval-subtitle"> {approval.title}</span>}
          </p>
          <div class="approval-message">
            <label for={inputId}>Message to the agent (optional)</label>
            <input id={inputId} type="text" autocomplete="off" value={message} onInput={(e) => setMessage(e.currentTarget.value)} />
          </div>
          <div class="approval-actions">
            {options.map((option) => (
              <button
                key={option.decision}
                type="button"
                class={`decision ${option.decision}`}
                data-decision={option.decision}
                disabled={busy}
                onClick={() => void answer(option.decision)}
              >
                {BUTTON_NAMES[option.decision] ?? option.label}
              </button>
            ))}
          </div>
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
        </>
      )}
    </div>
  );
}
