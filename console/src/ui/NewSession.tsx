import { useEffect, useRef, useState } from "preact/hooks";

import type { Session, SessionCreate } from "@agent-gateway/client";

import { describe, gateway } from "../gateway";
import { useValue } from "../store";
import { loadProviders, providers, readiness } from "./providers";
import { oneLine } from "./titles";

const WORKSPACE_KEY = "agent-gateway.workspace";
const MODES = [
  ["ask", "Ask before tools run"],
  ["auto_edits", "Allow edits, ask for commands"],
  ["allow_all", "Allow everything"],
  ["read_only", "Read only"],
] as const;

/** The compact "new session" dialog: where, which agent, how much it may do, and a first prompt. */
export function NewSessionDialog({
  open,
  onClose,
  onCreated,
  suggestedWorkspace,
}: {
  open: boolean;
  onClose: () => void;
  onCreated: (session: Session) => void;
  suggestedWorkspace: string;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const list = useValue(providers);
  const [place, setPlace] = useState<"directory" | "worktree">("directory");
  const [workspace, setWorkspace] = useState("");
  const [repository, setRepository] = useState("");
  const [ref, setRef] = useState("");
  const [branch, setBranch] = useState("");
  const [provider, setProvider] = useState("");
  const [model, setModel] = useState("");
  const [mode, setMode] = useState("ask");
  const [title, setTitle] = useState("");
  const [prompt, setPrompt] = useState("");
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (open && !element.open) {
      element.showModal();
      setError(null);
      if (!workspace) setWorkspace(localStorage.getItem(WORKSPACE_KEY) ?? suggestedWorkspace);
      void loadProviders().catch(() => undefined);
    }
    if (!open && element.open) element.close();
  }, [open]);

  async function create(): Promise<void> {
    setBusy(true);
    setError(null);
    const body: SessionCreate = { approval_mode: mode as SessionCreate["approval_mode"] };
    if (place === "directory") body.workspace = workspace.trim();
    else {
      body.repository = repository.trim();
      if (ref.trim()) body.ref = ref.trim();
      if (branch.trim()) body.branch = branch.trim();
    }
    if (provider) body.provider = provider as SessionCreate["provider"];
    if (model.trim()) body.model = model.trim();
    const named = title.trim() || (prompt.trim() ? oneLine(prompt, 80) : "");
    if (named) body.metadata = { title: named };
    try {
      const session = await gateway().createSession(body);
      if (place === "directory") localStorage.setItem(WORKSPACE_KEY, workspace.trim());
      if (prompt.trim()) await gateway().startTurn(session.id, prompt.trim());
      setTitle("");
      setPrompt("");
      onCreated(session);
    } catch (caught) {
      setError(describe(caught));
    } finally {
      setBusy(false);
    }
  }

  return (
    <dialog ref={dialog} class="new-session" aria-labelledby="new-session-title" onClose={onClose} onCancel={onClose}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          void create();
        }}
      >
        <h2 id="new-session-title">New session</h2>
        <fieldset class="place">
          <legend class="visually-hidden">Where the agent works</legend>
          <label class="inline">
            <input type="radio" name="place" checked={place === "directory"} onChange={() => setPlace("directory")} /> Directory
          </label>
          <label class="inline">
            <input type="radio" name="place" checked={place === "worktree"} onChange={() => setPlace("worktree")} /> Git worktree
          </label>
        </fieldset>
        {place === "directory" ? (
          <label>
            Workspace
            <input required autocomplete="off" placeholder="/path/to/project" value={workspace} onInput={(e) => setWorkspace(e.currentTarget.value)} />
          </label>
        ) : (
          <>
            <label>
              Repository
              <input required autocomplete="off" value={repository} onInput={(e) => setRepository(e.currentTarget.value)} />
            </label>
            <div class="row">
              <label>
                Ref (optional)
                <input autocomplete="off" placeholder="HEAD" value={ref} onInput={(e) => setRef(e.currentTarget.value)} />
              </label>
              <label>
                Branch (optional)
                <input autocomplete="off" placeholder="agent/<session id>" value={branch} onInput={(e) => setBranch(e.currentTarget.value)} />
              </label>
            </div>
          </>
        )}
        <div class="row">
          <label>
            Provider
            <select value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
              <option value="">The gateway's choice</option>
              {(list ?? []).map((p) => {
                const ready = readiness(p);
                return (
                  <option key={p.name} value={p.name} disabled={!ready.ok}>
                    {p.name}
                    {ready.ok ? "" : ` (${ready.text})`}
                  </option>
                );
              })}
            </select>
          </label>
          <label>
            Approval mode
            <select value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
              {MODES.map(([value, text]) => (
                <option key={value} value={value}>
                  {text}
                </option>
              ))}
            </select>
          </label>
        </div>
        <label>
          First message (optional)
          <textarea rows={3} value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} />
        </label>
        <button type="button" class="link" aria-expanded={more} onClick={() => setMore(!more)}>
          {more ? "Fewer options" : "More options"}
        </button>
        {more && (
          <div class="row">
            <label>
              Title (optional)
              <input autocomplete="off" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
            </label>
            <label>
              Model (optional)
              <input autocomplete="off" value={model} onInput={(e) => setModel(e.currentTarget.value)} />
            </label>
          </div>
        )}
        {error && (
          <p id="create-error" class="error" role="alert">
            {error}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="secondary" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" disabled={busy}>
            Create session
          </button>
        </div>
      </form>
    </dialog>
  );
}
