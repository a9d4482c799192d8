import { useEffect, useMemo, useRef, useState } from "preact/hooks";

import type { Session, SessionStatus } from "@agent-gateway/client";

import { describe, gateway } from "../gateway";
import { Store, useValue } from "../store";
import { providers as configured, loadProviders } from "./providers";
import { firstPrompts, sessionTitle } from "./titles";

const PAGE = 50;
const STATUSES: SessionStatus[] = ["idle", "running", "awaiting_approval", "retrying", "closed", "failed"];
/** How long typing pauses before the search is sent. */
const SEARCH_DELAY_MS = 250;

export interface ListFilter {
  status: SessionStatus | "";
  provider: string;
  /** Words the gateway finds in each session's title, id, workspace, repository or branch. */
  q: string;
}

interface ListState {
  sessions: Session[];
  done: boolean;
  loading: boolean;
  error: string | null;
}

const NO_FILTER: ListFilter = { status: "", provider: "", q: "" };

/** The sessions the sidebar has read, newest first, for one filter; the gateway filters and
 * searches, so a match is found however old it is. */
export class SessionList {
  readonly store = new Store<ListState>({ sessions: [], done: false, loading: false, error: null });
  #filter: ListFilter = NO_FILTER;
  #generation = 0;

  reset(filter: ListFilter): void {
    this.#filter = filter;
    this.#generation++;
    this.store.set({ sessions: [], done: false, loading: false, error: null });
    void this.more();
  }

  async more(): Promise<void> {
    const state = this.store.value;
    if (state.loading || state.done) return;
    const generation = this.#generation;
    const { status, provider, q } = this.#filter;
    this.store.set({ ...state, loading: true });
    const last = state.sessions[state.sessions.length - 1];
    try {
      const page = await gateway().listSessions({
        limit: PAGE,
        ...(status ? { status } : {}),
        ...(provider ? { provider } : {}),
        ...(q ? { q } : {}),
        ...(last ? { before: last.created_at } : {}),
      });
      if (generation !== this.#generation) return;
      const known = new Set(state.sessions.map((s) => s.id));
      const fresh = page.sessions.filter((s) => !known.has(s.id));
      this.store.set({ sessions: [...state.sessions, ...fresh], done: page.sessions.length === 0, loading: false, error: null });
    } catch (error) {
      if (generation !== this.#generation) return;
      this.store.set({ ...this.store.value, loading: false, error: describe(error) });
    }
  }

  /** A session created or changed here: shown first, or updated in place (a filtered list
   * takes in only a session it would show). */
  upsert(session: Session): void {
    const state = this.store.value;
    const index = state.sessions.findIndex((s) => s.id === session.id);
    if (index >= 0) {
      this.store.set({ ...state, sessions: state.sessions.map((s) => (s.id === session.id ? session : s)) });
      return;
    }
    const { status, provider, q } = this.#filter;
    if (q || (status && session.status !== status) || (provider && session.provider !== provider)) return;
    this.store.set({ ...state, sessions: [session, ...state.sessions] });
  }
}

function ago(iso: string): string {
  const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

export function Sidebar({
  list,
  current,
  onOpen,
  onNew,
}: {
  list: SessionList;
  current: string | null;
  onOpen: (id: string) => void;
  onNew: () => void;
}) {
  const state = useValue(list.store);
  const known = useValue(configured);
  useValue(firstPrompts); // a row named by a prompt sent here
  const [query, setQuery] = useState("");
  const [q, setQ] = useState("");
  const [status, setStatus] = useState<SessionStatus | "">("");
  const [provider, setProvider] = useState("");
  const sentinel = useRef<HTMLLIElement>(null);

  // The search is sent once typing pauses; a filter change is sent at once.
  useEffect(() => {
    const timer = setTimeout(() => setQ(query.trim()), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [query]);
  useEffect(() => list.reset({ status, provider, q }), [list, status, provider, q]);
  useEffect(() => {
    if (!configured.value) void loadProviders().catch(() => undefined); // the filter still lists the sessions' own
  }, []);

  const providers = useMemo(
    () => [...new Set([...(known ?? []).map((p) => p.name), ...state.sessions.map((s) => s.provider)])].sort(),
    [known, state.sessions],
  );
  const shown = state.sessions;
  const filtered = Boolean(q || status || provider);

  // Infinite scroll: the last row coming into view reads the next page.
  useEffect(() => {
    const element = sentinel.current;
    if (!element) return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) void list.more();
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, [list, state.sessions.length, state.done]);

  return (
    <nav class="sidebar" aria-label="Sessions">
      <div class="sidebar-top">
        <button type="button" id="new-session" onClick={onNew}>
          New session
        </button>
        <label for="session-search" class="visually-hidden">
          Search sessions
        </label>
        <input id="session-search" type="search" placeholder="Search sessions" value={query} autocomplete="off" onInput={(e) => setQuery(e.currentTarget.value)} />
        <div class="filters">
          <label>
            <span class="visually-hidden">Status</span>
            <select aria-label="Status filter" value={status} onChange={(e) => setStatus(e.currentTarget.value as SessionStatus | "")}>
              <option value="">Any status</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s.replace(/_/g, " ")}
                </option>
              ))}
            </select>
          </label>
          <label>
            <span class="visually-hidden">Provider</span>
            <select aria-label="Provider filter" value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
              <option value="">Any provider</option>
              {providers.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </label>
        </div>
      </div>
      <ul id="sessions" class="session-list">
        {shown.map((session) => (
          <li key={session.id}>
            <a
              href={`#session=${session.id}`}
              data-session-id={session.id}
              aria-current={session.id === current ? "true" : undefined}
              onClick={(e) => {
                e.preventDefault();
                onOpen(session.id);
              }}
            >
              <span class="row-title">{sessionTitle(session)}</span>
              <span class="row-meta">
                <span class={`status ${session.status}`}>{session.status.replace(/_/g, " ")}</span>
                <span>{session.provider}</span>
                <span>{ago(session.created_at)}</span>
              </span>
              <span class="row-place">
                {session.forked_from
                  ? `fork of ${session.forked_from}`
                  : session.repository
                    ? `${session.repository} @ ${session.branch ?? ""}`
                    : session.workspace}
              </span>
            </a>
          </li>
        ))}
        {!state.done && (
          <li ref={sentinel} class="more" aria-hidden={!state.loading}>
            {state.loading ? "Loading…" : ""}
          </li>
        )}
        {state.done && shown.length === 0 && <li class="empty">{filtered ? "No session matches." : "No sessions yet."}</li>}
      </ul>
      {state.error && (
        <p class="error" role="alert">
          {state.error}
        </p>
      )}
    </nav>
  );
}
