import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

import { describe, gateway } from "../gateway";
import type { LiveSession, StreamState } from "../live";
import { useValue } from "../store";
import { decide } from "./Approval";
import { LiveContext } from "./context";
import { sessionTitle } from "./titles";
import { PLAN_MARKS, TranscriptView } from "./Transcript";
import { usageText } from "./TurnEnd";

const STREAM_TEXT: Record<StreamState, string> = {
  connecting: "stream: connecting",
  live: "stream: live",
  reconnecting: "stream: reconnecting",
  delayed: "stream: delayed",
  ended: "stream: ended",
};
const AT_END_PX = 40;

/** The bar at the bottom of a phone's screen while an approval waits: one thumb away. */
function PendingBar({ live }: { live: LiveSession }) {
  const { transcript } = useValue(live.store);
  const [error, setError] = useState<string | null>(null);
  const first = transcript.pending[0];
  if (!first) return null;
  const approval = first.approval;
  const show = (): void => {
    const selector = approval ? `[data-approval-id="${approval.id}"]` : `[data-question-id="${first.question?.id ?? ""}"]`;
    document.querySelector(selector)?.scrollIntoView({ block: "center", behavior: "smooth" });
  };
  return (
    <div class="pending-bar" role="region" aria-label="Waiting for you">
      <span class="pending-text">
        {approval ? `Allow ${approval.tool}?` : "The agent asks a question"}
        {transcript.pending.length > 1 ? ` (+${transcript.pending.length - 1})` : ""}
      </span>
      <button type="button" class="secondary" onClick={show}>
        Review
      </button>
      {approval && (
        <>
          <button type="button" class="decision deny" onClick={async () => setError(await decide(live.id, approval.id, "deny", ""))}>
            Deny
          </button>
          <button type="button" class="decision allow" onClick={async () => setError(await decide(live.id, approval.id, "allow", ""))}>
            Allow
          </button>
        </>
      )}
      {error && <span class="error" role="alert">{error}</span>}
    </div>
  );
}

function PlanPanel({ live }: { live: LiveSession }) {
  const { transcript } = useValue(live.store);
  const plan = transcript.plan;
  return (
    <details id="plan" class="side-panel" open hidden={!plan}>
      <summary>Plan</summary>
      <ul id="plan-entries">
        {(plan ?? []).map((entry, index) => (
          <li key={index} data-status={entry.status}>
            {PLAN_MARKS[entry.status] ?? "•"} {entry.text}
          </li>
        ))}
      </ul>
    </details>
  );
}

function Composer({ live }: { live: LiveSession }) {
  const state = useValue(live.store);
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const status = state.session.status;
  const closed = status === "closed" || status === "failed";
  const busy = status === "running" || status === "retrying" || status === "awaiting_approval";

  async function send(): Promise<void> {
    const text = prompt.trim();
    if (!text || closed) return;
    setSending(true);
    setError(null);
    try {
      await gateway().startTurn(live.id, text);
      setPrompt("");
    } catch (caught) {
      setError(describe(caught));
    } finally {
      setSending(false);
    }
  }

  async function interrupt(): Promise<void> {
    try {
      await gateway().interrupt(live.id);
    } catch (caught) {
      setError(describe(caught));
    }
  }

  return (
    <form class="composer" onSubmit={(e) => { e.preventDefault(); void send(); }}>
      <label for="prompt" class="visually-hidden">
        Prompt
      </label>
      <textarea
        id="prompt"
        rows={2}
        placeholder={closed ? "This session is closed" : "Message the agent (Enter sends, Shift+Enter adds a line)"}
        disabled={closed}
        value={prompt}
        onInput={(e) => setPrompt(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            void send();
          }
        }}
      />
      <div class="composer-actions">
        <button type="button" class="secondary" id="interrupt" disabled={!busy} onClick={() => void interrupt()}>
          Interrupt
        </button>
        <button type="submit" disabled={closed || sending || !prompt.trim()}>
          Send
        </button>
      </div>
      {error && (
        <p id="turn-error" class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

/** One open session: its header, the transcript (following the end), the composer. */
export function SessionView({ live, onOpen }: { live: LiveSession; onOpen: (id: string) => void }) {
  const state = useValue(live.store);
  const { session, transcript } = state;
  const log = useRef<HTMLDivElement>(null);
  const follow = useRef(true);
  const placed = useRef(0); // where this view last scrolled the log to
  const [closeError, setCloseError] = useState<string | null>(null);

  // Follows the end unless the reader scrolled up: a log above where this view put it was
  // moved by the reader, even before its scroll event arrives.
  useLayoutEffect(() => {
    const element = log.current;
    if (!element) return;
    if (element.scrollTop < placed.current - 2) follow.current = false;
    if (!follow.current) return;
    element.scrollTop = element.scrollHeight;
    placed.current = element.scrollTop;
  });

  // A new approval with an empty prompt box: focus its first button (Enter allows it).
  const pendingCount = transcript.pending.length;
  useEffect(() => {
    const first = transcript.pending[0];
    const prompt = document.getElementById("prompt") as HTMLTextAreaElement | null;
    if (!first?.approval || (prompt && prompt.value)) return;
    const button = document.querySelector<HTMLButtonElement>(`.approval.pending[data-approval-id="${first.approval.id}"] button.decision`);
    button?.focus({ preventScroll: false });
  }, [pendingCount]);

  useEffect(() => {
    const onKey = (event: KeyboardEvent): void => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      if (document.querySelector("dialog[open]")) return;
      const status = live.store.value.session.status;
      if (status === "running" || status === "retrying" || status === "awaiting_approval") {
        event.preventDefault();
        void gateway().interrupt(live.id).catch(() => undefined);
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [live]);

  useEffect(() => {
    document.getElementById("prompt")?.focus();
  }, [live]);

  async function close(): Promise<void> {
    try {
      await gateway().closeSession(live.id);
    } catch (caught) {
      setCloseError(describe(caught));
    }
  }

  const usage = transcript.usage;
  const spent = usage.input + usage.output > 0 ? usageText(usage) : "";
  const tree = session.repository
    ? `repository ${session.repository} · branch ${session.branch ?? "?"} · base ${(session.base ?? "").slice(0, 12)}`
    : session.workspace;
  const origin = transcript.forkedFrom;
  const parent = origin?.parent ?? session.forked_from ?? null;
  return (
    <LiveContext.Provider value={live}>
      <section class="session" aria-labelledby="chat-title">
        <header class="session-head">
          <div class="session-heading">
            <h2 id="chat-title">{sessionTitle(session, transcript.firstPrompt)}</h2>
            <p class="session-meta">
              <span id="session-status" class={`status ${session.status}`}>
                {session.status}
              </span>
              <span class="provider">{session.provider}</span>
              {session.model && <span>{session.model}</span>}
              <span id="session-id" class="mono">{session.id}</span>
              <span id="stream-state" class={`stream ${state.stream}`}>
                {STREAM_TEXT[state.stream]}
              </span>
            </p>
            <p id="session-place" class="session-place mono" title={tree}>
              {tree}
            </p>
            {parent && (
              <p id="session-origin" class="session-fork">
                forked from{" "}
                <a href={`#session=${parent}`} onClick={(e) => { e.preventDefault(); onOpen(parent); }}>
                  {parent}
                </a>
                {origin ? ` at turn ${origin.turnNumber}` : ""}
              </p>
            )}
          </div>
          <div class="session-actions">
            {spent && (
              <span id="session-usage" class="usage" title="Tokens and cost of this session's turns">
                {spent}
              </span>
            )}
            <button type="button" class="secondary" disabled={session.status === "closed"} onClick={() => void close()}>
              Close session
            </button>
          </div>
        </header>
        {closeError && <p class="error" role="alert">{closeError}</p>}
        {state.streamNote && (
          <p class="stream-note" role="status" data-control={state.streamNote.control}>
            {state.streamNote.text}
          </p>
        )}
        {state.error && <p class="error" role="alert">{state.error}</p>}
        <PlanPanel live={live} />
        <div
          id="log"
          ref={log}
          tabIndex={0}
          role="log"
          aria-live="polite"
          aria-label="Conversation"
          onScroll={(e) => {
            const el = e.currentTarget;
            follow.current = el.scrollHeight - el.scrollTop - el.clientHeight < AT_END_PX;
            if (follow.current) placed.current = el.scrollTop;
          }}
        >
          <TranscriptView transcript={transcript} onOpen={onOpen} />
        </div>
        <PendingBar live={live} />
        <Composer live={live} />
      </section>
    </LiveContext.Provider>
  );
}
