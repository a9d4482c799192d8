import { useEffect, useMemo, useState } from "preact/hooks";

import type { Session } from "@agent-gateway/client";

import { client, describe, gateway, signIn, signOut, storedToken } from "../gateway";
import { LiveSession } from "../live";
import { useValue } from "../store";
import { AdminView } from "./Admin";
import { NewSessionDialog } from "./NewSession";
import { SessionView } from "./SessionView";
import { SessionList, Sidebar } from "./Sidebar";
import { Theme } from "./Theme";
import { firstPrompts } from "./titles";

type Route = { view: "session"; id: string | null } | { view: "admin" };

function readRoute(): Route {
  const hash = location.hash.slice(1);
  if (hash === "admin") return { view: "admin" };
  const match = /^session=([A-Za-z0-9_-]{1,128})$/.exec(hash);
  return { view: "session", id: match?.[1] ?? null };
}

function SignIn({ initialError }: { initialError: string | null }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(initialError);
  const [busy, setBusy] = useState(false);
  return (
    <main id="signin" class="signin">
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(null);
          try {
            await signIn(key.trim());
          } catch (caught) {
            setError(describe(caught));
          } finally {
            setBusy(false);
          }
        }}
      >
        <h1>Agent Gateway</h1>
        <label for="token">Gateway key</label>
        <input id="token" type="password" autocomplete="off" required value={key} onInput={(e) => setKey(e.currentTarget.value)} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <p id="signin-error" class="error" role="alert">
          {error ?? ""}
        </p>
        <p class="hint">The key stays in this tab only (sessionStorage) and is sent to this gateway alone.</p>
      </form>
    </main>
  );
}

/** Keeps the open session's row in the list in step with its status. */
function RowSync({ live, list }: { live: LiveSession; list: SessionList }) {
  const { session, transcript } = useValue(live.store);
  useEffect(() => list.upsert({ ...session }), [session.status, session.id]);
  const first = transcript.firstPrompt;
  useEffect(() => {
    if (!first || firstPrompts.value.get(session.id) === first) return;
    firstPrompts.value.set(session.id, first); // the row is named like the header
    firstPrompts.notify();
  }, [first, session.id]);
  return null;
}

function Main() {
  const [route, setRoute] = useState<Route>(readRoute);
  const [live, setLive] = useState<LiveSession | null>(null);
  const [openError, setOpenError] = useState<string | null>(null);
  const [dialog, setDialog] = useState(false);
  const [drawer, setDrawer] = useState(false);
  const list = useMemo(() => new SessionList(), []);
  const sessions = useValue(list.store).sessions;

  // Esc closes the session drawer first (before it would interrupt a turn).
  useEffect(() => {
    if (!drawer) return;
    const onKey = (event: KeyboardEvent): void => {
      if (event.key !== "Escape") return;
      event.preventDefault();
      setDrawer(false);
    };
    addEventListener("keydown", onKey, { capture: true });
    return () => removeEventListener("keydown", onKey, { capture: true });
  }, [drawer]);

  useEffect(() => {
    const onHash = (): void => setRoute(readRoute());
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);

  const wanted = route.view === "session" ? route.id : null;
  useEffect(() => {
    if (!wanted || live?.id === wanted) return;
    let cancelled = false;
    setOpenError(null);
    gateway()
      .getSession(wanted)
      .then(
        (session) => {
          if (cancelled) return;
          const next = new LiveSession(session);
          next.start();
          setLive((previous) => {
            previous?.stop();
            return next;
          });
        },
        (caught) => !cancelled && setOpenError(describe(caught)),
      );
    return () => {
      cancelled = true;
    };
  }, [wanted]);
  useEffect(() => () => live?.stop(), [live]);


  const open = (id: string): void => {
    setDrawer(false);
    location.hash = `session=${id}`;
  };
  const created = (session: Session): void => {
    setDialog(false);
    list.upsert(session);
    open(session.id);
  };

  return (
    <div id="app" class={`app${drawer ? " drawer-open" : ""}`}>
      <header class="topbar">
        <button type="button" class="icon menu" aria-label="Sessions" aria-expanded={drawer} onClick={() => setDrawer(!drawer)}>
          ☰
        </button>
        <h1 class="brand">Agent Gateway</h1>
        <nav class="tabs" aria-label="Views">
          <a href={live ? `#session=${live.id}` : "#"} aria-current={route.view === "session" ? "page" : undefined}>
            Sessions
          </a>
          <a href="#admin" aria-current={route.view === "admin" ? "page" : undefined}>
            Admin
          </a>
        </nav>
        <button type="button" class="new-top" aria-label="New session" onClick={() => setDialog(true)}>
          +
        </button>
        <Theme />
        <button type="button" class="secondary signout" onClick={() => signOut()}>
          Sign out
        </button>
      </header>
      <div class="layout">
        <Sidebar list={list} current={live?.id ?? null} onOpen={open} onNew={() => setDialog(true)} />
        <button type="button" class="scrim" aria-label="Close the session list" tabIndex={-1} onClick={() => setDrawer(false)} />
        <main class="main">
          {route.view === "admin" ? (
            <AdminView />
          ) : live && wanted === live.id ? (
            <SessionView key={live.id} live={live} onOpen={open} />
          ) : (
            <section class="empty-state">
              {openError ? (
                <p class="error" role="alert">{openError}</p>
              ) : wanted ? (
                <p>Opening…</p>
              ) : (
                <>
                  <h2>No session open</h2>
                  <p>Pick one from the list, or start a new one.</p>
                  <button type="button" onClick={() => setDialog(true)}>
                    New session
                  </button>
                </>
              )}
            </section>
          )}
        </main>
      </div>
      {live && <RowSync live={live} list={list} />}
      <NewSessionDialog
        open={dialog}
        onClose={() => setDialog(false)}
        onCreated={created}
        suggestedWorkspace={sessions[0]?.workspace ?? ""}
      />
    </div>
  );
}

export function App() {
  const current = useValue(client);
  const [restoring, setRestoring] = useState(() => storedToken() !== null && current === null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const token = storedToken();
    if (!token || current) return;
    signIn(token)
      .catch((caught) => {
        signOut();
        setError(describe(caught));
      })
      .finally(() => setRestoring(false));
  }, []);
  if (restoring) return <p class="loading">Loading…</p>;
  return current ? <Main key="main" /> : <SignIn initialError={error} />;
}
