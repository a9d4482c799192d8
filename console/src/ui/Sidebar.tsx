import { useEffect, useMemo, useRef, useState } from "preact/hooks";

import type { Session, SessionStatus } from "@agent-gateway/client";

import { describe, gateway } from "../gateway";
import { Store, useValue } from "../store";
import { firstPrompts, metadataTitle, sessionTitle } from "./titles";

const PAGE = 50;
const STATUSES: SessionStatus[] = ["idle", "running", "awaiting_approval", "retrying", "closed", "failed"];
/** While a search finds nothing, older pages are read, up to this many. */
const SEARCH_PAGES = 10;

interface ListState {
  sessions: Session[];
  done: boolean;
  loading: boolean;
  error: string | null;
}

/** The sessions the sidebar has read, newest first, for one status filter. */
export class SessionList {
  readonly store = new Store<ListState>({ sessions: [], done: false, loading: false, error: null });
  #status: SessionStatus | "" = "";
  #generation = 0;

  reset(status: SessionStatus | ""): void {
    this.#status = status;
    this.#generation++;
    this.store.set({ sessions: [], done: false, loading: false, error: null });
    void this.more();
  }

  async more(): Promise<void> {
    const state = this.store.value;
    if (state.loading || state.done) return;
    const generation = this.#generation;
    this.store.set({ ...state, loading: true });
    const last = state.sessions[state.sessions.length - 1];
    try {
      const page = await gateway().listSessions({
        limit: PAGE,
        ...(this.#status ? { status: this.#status } : {}),
        ...(last ? { before: last.created_at } : {}),
      });
      if (generation !== this.#generation) return;
      const known = new Set(state.sessions.map((s) => s.id));
      const fresh = page.sessions.filter((s) => !known.has(s.id));
      this.store.set({ sessions: [...state.sessions, ...fresh], done: page.sessions.length === 0, loading: false, error: null });
      void fetchFirstPrompts(fresh);
    } catch (error) {
      if (generation !== this.#generation) return;
      this.store.set({ ...this.store.value, loading: false, error: describe(error) });
    }
  }

  /** A session created or changed here: shown first, or updated in place. */
  upsert(session: Session): void {
    const state = this.store.value;
    const others = state.sessions.filter((s) => s.id !== session.id);
    const index = state.sessions.findIndex((s) => s.id === session.id);
    const sessions = index < 0 ? [session, ...others] : state.sessions.map((s) => (s.id === session.id ? session : s));
    this.store.set({ ...state, sessions });
  }
}

/** Reads the first prompt of each untitled session, a few at a time. */
async function fetchFirstPrompts(sessions: Session[]): Promise<void> {
  const wanted = sessions.filter((s) => !metadataTitle(s) && !firstPrompts.value.has(s.id));
  const queue = [...wanted];
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      try {
        const turns = await gateway().listTurns(next.id);
        const first = turns[0];
        if (first) {
          firstPrompts.value.set(next.id, first.prompt);
          firstPrompts.notify();
        }
      } catch {
        // An untitled row keeps its workspace name.
      }
    }
  };
  await Promise.all([worker(), worker(), worker()]);
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
  useValue(firstPrompts);
  const [query, setQuery] = useState("");
  const [status, setStatus] = useState<SessionStatus | "">("");
  const [provider, setProvider] = useState("");
  const sentinel = useRef<HTMLLIElement>(null);
  const searchedPages = useRef(0);

  useEffect(() => list.reset(status), [list, status]);

  const providers = useMemo(() => [...new Set(state.sessions.map((s) => s.provider))].sort(), [state.sessions]);
  const needle = query.trim().toLowerCase();
  const shown = state.sessions.filter((session) => {
    if (provider && session.provider !== provider) return false;
    if (!needle) return true;
    const haystack = [sessionTitle(session), session.id, session.workspace, session.repository ?? "", session.branch ?? ""]
      .join(" ")
      .toLowerCase();
    return haystack.includes(needle);
  });

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

  // A search that finds little reads older pages too (a bounded number).
  useEffect(() => {
    searchedPages.current = 0;
  }, [needle, provider]);
  useEffect(() => {
    if ((!needle && !provider) || state.done || state.loading || shown.length >= 10) return;
    if (searchedPages.current >= SEARCH_PAGES) return;
    searchedPages.current++;
    void list.more();
  }, [needle, provider, state.done, state.loading, shown.length, list]);

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
        {state.done && shown.length === 0 && <li class="empty">{needle || provider ? "No session matches." : "No sessions yet."}</li>}
      </ul>
      {state.error && (
        <p class="error" role="alert">
          {state.error}
        </p>
      )}
    </nav>
  );
}
