// Agent Gateway web console: plain ES module, no dependencies, no build step.
//
// Everything the agent, its tools or the gateway send is untrusted text: it is only ever
// placed with textContent, never parsed as HTML.
//
// Events are applied once each, in seq order: `state.lastSeq` is the newest seq rendered and
// anything at or below it is a duplicate. Opening a session loads its history from the JSON
// events page, then follows the live tail over EventSource from the last rendered seq
// (`?after=`); the browser's own reconnects resend Last-Event-ID, and the console's reconnects
// (after `evicted`, `shutdown`, or a refused connection) start again from `state.lastSeq`.
// Every rendered event leaves one element carrying its `data-seq` and `data-type`.

const TOKEN_KEY = "agent-gateway.key";
const WORKSPACE_KEY = "agent-gateway.workspace";
const PAGE_LIMIT = 1000;
const RECONNECT_MIN_MS = 1000;
const RECONNECT_MAX_MS = 5000; // a local gateway: polling it every few seconds is cheap
const TURN_END = new Set(["turn.completed", "turn.failed", "turn.interrupted"]);

const $ = (id) => document.getElementById(id);

const state = {
  token: null,
  generation: 0, // bumped whenever the open session changes; stale callbacks check it
  session: null, // the open session (as the API last described it)
  status: null, // derived from events as they are applied
  activeTurn: null,
  lastSeq: 0,
  forkedAtNumber: null, // the open session is a fork: the number of the turn it was made at
  stream: null,
  reconnectTimer: null,
  reconnectDelay: RECONNECT_MIN_MS,
  live: false, // history loaded; events now arrive as they happen
  turns: new Map(), // turn_id -> container element
  messages: new Map(), // message_id -> {root, text}
  tools: new Map(), // tool_id -> card parts
  approvals: new Map(), // approval_id -> card parts
  questions: new Map(), // question_id -> card parts
};

// --- the API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(path, { method = "GET", body } = {}) {
  const headers = { Authorization: `Bearer ${state.token}`, Accept: "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  let payload = null;
  try {
    payload = await response.json();
  } catch {
    payload = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, payload);
    if (response.status === 401) signOut("The gateway refused this key; sign in again.");
    throw error;
  }
  return payload;
}

function sessionPath(id, rest = "") {
  return `/v1/sessions/${encodeURIComponent(id)}${rest}`;
}

function describe(error) {
  if (error instanceof ApiError) {
    const kind = error.problem.type ? error.problem.type.split(":").pop() : `HTTP ${error.status}`;
    return `${kind}: ${error.message}`;
  }
  return `The gateway did not answer (${error.message}).`;
}

// --- small DOM helpers -----------------------------------------------------------------------

function node(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined && text !== null) element.textContent = String(text);
  return element;
}

function stamp(element, envelope) {
  element.dataset.seq = String(envelope.seq);
  element.dataset.type = envelope.type;
  if (envelope.at) element.title = `#${envelope.seq} · ${envelope.at}`;
  return element;
}

function pretty(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function showError(id, message) {
  $(id).textContent = message || "";
}

function formatTime(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

// --- signing in ------------------------------------------------------------------------------

async function signIn(token) {
  state.token = token;
  await loadProviders(false); // throws ApiError(401) on a wrong key
  sessionStorage.setItem(TOKEN_KEY, token);
  $("signin").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = "signed in";
  await loadSessions();
  const id = sessionFromHash();
  if (id) await openSession(id);
  else $("new-workspace").focus();
}

function signOut(message) {
  state.generation += 1;
  closeStream();
  state.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("signin").hidden = false;
  $("who").textContent = "";
  $("token").value = "";
  showError("signin-error", message || "");
  $("token").focus();
}

// --- providers and sessions --------------------------------------------------------------------

async function loadProviders(fresh) {
  const body = await api(`/v1/providers${fresh ? "?fresh=true" : ""}`);
  const list = $("providers");
  list.replaceChildren();
  const select = $("new-provider");
  const chosen = select.value;
  select.replaceChildren(node("option", null, "Gateway default"));
  select.firstChild.value = "";
  for (const provider of body.providers) {
    const item = node("li", "provider");
    item.dataset.provider = provider.name;
    const head = node("div", "provider-head");
    head.append(node("span", "provider-name", provider.name));
    const available = provider.enabled && provider.health.available;
    const badge = node("span", `badge ${available ? "ok" : "bad"}`);
    badge.textContent = !provider.enabled ? "disabled" : available ? "available" : "unavailable";
    head.append(badge);
    item.append(head);
    const version = provider.installed_version || "not installed";
    const pinned = provider.pinned_version ? ` (pinned ${provider.pinned_version})` : "";
    item.append(node("div", "provider-version", `${version}${pinned}`));
    if (provider.health.reason) {
      // Why a provider that should serve cannot; a disabled one only says so on hover.
      if (provider.enabled) item.append(node("div", "provider-reason", provider.health.reason));
      else item.title = provider.health.reason;
    }
    list.append(item);
    if (provider.enabled) {
      const option = node("option", null, provider.name);
      option.value = provider.name;
      select.append(option);
    }
  }
  select.value = [...select.options].some((o) => o.value === chosen) ? chosen : "";
}

async function loadSessions() {
  const body = await api("/v1/sessions?limit=50");
  const list = $("sessions");
  list.replaceChildren();
  if (!body.sessions.length) list.append(node("li", "empty", "No sessions yet."));
  for (const session of body.sessions) {
    const item = node("li");
    const button = node("button", "session-item");
    button.type = "button";
    button.dataset.sessionId = session.id;
    button.append(node("span", "session-id", session.id));
    button.append(node("span", `badge status-${session.status}`, session.status));
    const place = session.branch ? `${session.repository} @ ${session.branch}` : session.workspace;
    button.append(node("span", "session-sub", `${session.provider} · ${place}`));
    if (session.forked_from) button.append(node("span", "session-sub", `fork of ${session.forked_from}`));
    button.append(node("span", "session-sub", formatTime(session.created_at)));
    if (state.session?.id === session.id) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => {
      location.hash = `session=${session.id}`;
    });
    item.append(button);
    list.append(item);
  }
  const workspace = $("new-workspace");
  // Suggest a workspace only into an empty field nobody is typing in: a list that arrives
  // while someone types must not put its path in front of theirs. A worktree or a fork's
  // copy is the gateway's own directory, never a workspace to name.
  if (!workspace.value && document.activeElement !== workspace) {
    const named = body.sessions.find((s) => !s.repository && !s.forked_from);
    workspace.value = localStorage.getItem(WORKSPACE_KEY) || named?.workspace || "";
  }
}

// The new-session form asks for a workspace or a repository (with its ref and branch): the
// other group's fields are disabled, so they are neither required nor sent.
function choosePlace() {
  const repository = document.querySelector('input[name="place"]:checked')?.value === "repository";
  $("place-workspace").hidden = repository;
  $("place-repository").hidden = !repository;
  $("new-workspace").disabled = repository;
  for (const id of ["new-repository", "new-ref", "new-branch"]) $(id).disabled = !repository;
}

async function createSession(form) {
  const data = new FormData(form);
  const body = {};
  const fields = ["workspace", "repository", "ref", "branch", "provider", "scenario", "model"];
  for (const field of [...fields, "approval_mode"]) {
    const value = String(data.get(field) || "").trim(); // a disabled field is not in `data`
    if (value) body[field] = value;
  }
  showError("create-error", "");
  try {
    const session = await api("/v1/sessions", { method: "POST", body });
    if (body.workspace) localStorage.setItem(WORKSPACE_KEY, body.workspace);
    location.hash = `session=${session.id}`;
    await loadSessions();
  } catch (error) {
    showError("create-error", describe(error));
  }
}

function sessionFromHash() {
  const match = /^#session=([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
  return match ? match[1] : null;
}

// --- opening a session: history, then the live stream -----------------------------------------

async function openSession(id) {
  const generation = ++state.generation;
  closeStream();
  Object.assign(state, {
    session: null,
    status: null,
    activeTurn: null,
    lastSeq: 0,
    forkedAtNumber: null,
    live: false,
    reconnectDelay: RECONNECT_MIN_MS,
  });
  for (const map of [state.turns, state.messages, state.tools, state.approvals, state.questions]) {
    map.clear();
  }
  $("log").replaceChildren();
  showPlan([]);
  showError("turn-error", "");
  for (const button of document.querySelectorAll(".session-item")) {
    if (button.dataset.sessionId === id) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
  let session;
  try {
    session = await api(sessionPath(id));
  } catch (error) {
    if (generation !== state.generation) return;
    $("chat-title").textContent = "No session open";
    $("session-meta").textContent = "";
    showError("turn-error", describe(error));
    return;
  }
  if (generation !== state.generation) return;
  state.session = session;
  state.status = session.status;
  showSession();
  try {
    await loadHistory(id, generation);
  } catch (error) {
    if (generation === state.generation) showError("turn-error", describe(error));
    return;
  }
  if (generation !== state.generation) return;
  state.live = true;
  scrollToEnd(true);
  openStream(id, generation);
  $("prompt").focus();
}

async function loadHistory(id, generation) {
  for (;;) {
    let page;
    try {
      page = await api(sessionPath(id, `/events?after=${state.lastSeq}&limit=${PAGE_LIMIT}`));
    } catch (error) {
      if (error instanceof ApiError && error.status === 410 && error.problem.first_seq) {
        notice(`Events ${state.lastSeq + 1}–${error.problem.first_seq - 1} are no longer kept.`);
        state.lastSeq = error.problem.first_seq - 1;
        continue;
      }
      throw error;
    }
    if (generation !== state.generation) return;
    for (const envelope of page.events) apply(envelope);
    if (!page.events.length || state.lastSeq >= page.last_seq) return;
  }
}

function openStream(id, generation) {
  closeStream();
  const query = `after=${state.lastSeq}&access_token=${encodeURIComponent(state.token)}`;
  const stream = new EventSource(sessionPath(id, `/events?${query}`));
  state.stream = stream;
  setStreamState("connecting…");
  const current = () => generation === state.generation && state.stream === stream;
  stream.onopen = () => {
    if (!current()) return;
    state.reconnectDelay = RECONNECT_MIN_MS;
    setStreamState("live");
  };
  stream.onmessage = (message) => {
    if (!current()) return;
    let envelope;
    try {
      envelope = JSON.parse(message.data);
    } catch {
      return;
    }
    apply(envelope);
  };
  stream.addEventListener("resync_required", (message) => {
    if (!current()) return;
    const frame = JSON.parse(message.data);
    notice(
      `Events ${frame.after + 1}–${frame.first_seq - 1} are no longer kept; ` +
        `continuing from ${frame.first_seq}.`,
      "resync",
    );
    state.lastSeq = Math.max(state.lastSeq, frame.first_seq - 1);
    refreshSession(generation);
  });
  stream.addEventListener("evicted", (message) => {
    if (!current()) return;
    const frame = JSON.parse(message.data);
    notice(`This page fell behind the stream (${frame.reason}); reconnecting.`, "evicted");
    reconnect(id, generation, 0);
  });
  // Several replicas: this one cannot hear the replica running the session (Redis is away),
  // so events come from the store every `poll_ms`; the stream itself goes on.
  stream.addEventListener("degraded", (message) => {
    if (!current()) return;
    const frame = JSON.parse(message.data);
    const every = Math.round((Number(frame.poll_ms) || 2000) / 1000);
    notice(`Live updates are delayed (${frame.reason}); events arrive every ${every} s.`, "degraded");
    setStreamState("delayed");
  });
  stream.addEventListener("recovered", () => {
    if (!current()) return;
    notice("Live updates are back.", "recovered");
    setStreamState("live");
  });
  stream.addEventListener("shutdown", (message) => {
    if (!current()) return;
    const frame = JSON.parse(message.data);
    const wait = Number(frame.retry_ms) || 5000;
    notice(`The gateway is shutting down; reconnecting in ${Math.round(wait / 1000)} s.`, "shutdown");
    reconnect(id, generation, wait);
  });
  stream.onerror = () => {
    if (!current()) return;
    if (stream.readyState === EventSource.CLOSED) {
      // Refused (an HTTP error or 204 at the end of a closed session): decide ourselves.
      closeStream();
      afterRefusal(id, generation);
    } else {
      setStreamState("reconnecting…"); // the browser retries with Last-Event-ID
    }
  };
}

function closeStream() {
  clearTimeout(state.reconnectTimer);
  state.reconnectTimer = null;
  if (state.stream) {
    state.stream.close();
    state.stream = null;
  }
}

function reconnect(id, generation, delayMs) {
  closeStream();
  setStreamState(delayMs ? "reconnecting…" : "connecting…");
  state.reconnectTimer = setTimeout(() => {
    if (generation === state.generation) afterRefusal(id, generation, true);
  }, delayMs);
}

async function afterRefusal(id, generation, immediate = false) {
  let session;
  try {
    session = await api(sessionPath(id));
  } catch (error) {
    if (generation !== state.generation) return;
    if (error instanceof ApiError && error.status !== 429 && error.status < 500) {
      setStreamState("stopped");
      showError("turn-error", describe(error));
      return;
    }
    retryLater(id, generation); // the gateway is down or busy: try again later
    return;
  }
  if (generation !== state.generation) return;
  state.session = session;
  if (["closed", "failed"].includes(session.status) && state.lastSeq >= session.last_seq) {
    state.status = session.status;
    showSession();
    setStreamState("ended");
    return;
  }
  if (immediate) openStream(id, generation);
  else retryLater(id, generation);
}

function retryLater(id, generation) {
  const delay = state.reconnectDelay;
  state.reconnectDelay = Math.min(delay * 1.5, RECONNECT_MAX_MS);
  setStreamState(`reconnecting in ${Math.ceil(delay / 1000)} s…`);
  clearTimeout(state.reconnectTimer);
  state.reconnectTimer = setTimeout(() => {
    if (generation === state.generation) afterRefusal(id, generation, true);
  }, delay);
}

async function refreshSession(generation) {
  try {
    const session = await api(sessionPath(state.session.id));
    if (generation !== state.generation) return;
    state.session = session;
    state.status = session.status;
    showSession();
  } catch {
    // shown by the next action that needs the gateway
  }
}

function setStreamState(text) {
  $("stream-state").textContent = text ? `stream: ${text}` : "";
}

function showSession() {
  const session = state.session;
  $("chat-title").textContent = session.id;
  const parts = [session.provider, session.workspace, `approvals: ${session.approval_mode}`];
  if (session.model) parts.push(`model: ${session.model}`);
  $("session-meta").textContent = parts.join(" · ");
  const place = $("session-place");
  place.hidden = !session.repository;
  place.textContent = session.repository
    ? `repository ${session.repository} · branch ${session.branch} · base ${(session.base || "").slice(0, 12)}`
    : "";
  const origin = $("session-origin");
  origin.hidden = !session.forked_from;
  origin.replaceChildren();
  if (session.forked_from) {
    const parent = node("a", "session-link", session.forked_from);
    parent.href = `#session=${session.forked_from}`;
    const at = state.forkedAtNumber ? `turn ${state.forkedAtNumber}` : `turn ${session.forked_at}`;
    origin.append("forked from ", parent, ` at ${at}`);
  }
  $("close-session").hidden = ["closed", "failed"].includes(state.status);
  updateControls();
}

function updateControls() {
  const open = state.session && !["closed", "failed"].includes(state.status);
  const running = Boolean(state.activeTurn);
  $("session-status").textContent = state.session ? state.status : "";
  $("session-status").className = `badge status-${state.status || "none"}`;
  const listed = document.querySelector('.session-item[aria-current="true"] .badge');
  if (listed && state.status) {
    listed.textContent = state.status;
    listed.className = `badge status-${state.status}`;
  }
  $("prompt").disabled = !open;
  $("send").disabled = !open || running;
  $("interrupt").disabled = !running;
}

// --- applying events -------------------------------------------------------------------------

// Whether the log followed its end when this frame's first event arrived (null: no event yet).
// Reading the layout once per frame, and scrolling once, keeps a storm of deltas from forcing
// a layout per event.
let followThisFrame = null;

function apply(envelope) {
  if (!envelope || typeof envelope.seq !== "number" || envelope.seq <= state.lastSeq) return;
  state.lastSeq = envelope.seq;
  if (state.live && followThisFrame === null) {
    followThisFrame = isAtEnd();
    requestAnimationFrame(() => {
      const follow = followThisFrame;
      followThisFrame = null;
      scrollToEnd(follow);
    });
  }
  render(envelope);
  track(envelope);
}

function track(envelope) {
  const type = envelope.type;
  if (type === "turn.started") {
    state.activeTurn = envelope.turn_id;
    state.status = "running";
  } else if (type === "approval.requested" || type === "question.asked") {
    state.status = "awaiting_approval";
  } else if (
    type === "approval.resolved" ||
    type === "question.resolved" ||
    type === "provider.switched"
  ) {
    if (state.activeTurn) state.status = "running";
  } else if (type === "retry.scheduled" && envelope.data.source === "gateway") {
    state.status = "retrying";
  } else if (TURN_END.has(type)) {
    if (state.activeTurn === envelope.turn_id || !envelope.turn_id) state.activeTurn = null;
    state.status = "idle";
    if (state.live) loadSessions().catch(() => {});
  } else if (type === "session.closed") {
    state.activeTurn = null;
    state.status = "closed";
    $("close-session").hidden = true;
  }
  updateControls();
}

function turnContainer(envelope) {
  if (!envelope.turn_id) return $("log");
  let turn = state.turns.get(envelope.turn_id);
  if (!turn) {
    turn = node("article", "turn");
    turn.dataset.turnId = envelope.turn_id;
    turn.setAttribute("aria-label", `Turn ${envelope.turn_id}`);
    $("log").append(turn);
    state.turns.set(envelope.turn_id, turn);
  }
  return turn;
}

function line(envelope, className, text) {
  const element = stamp(node("div", className, text), envelope);
  turnContainer(envelope).append(element);
  return element;
}

function notice(text, kind = "info") {
  const element = node("div", `notice control ${kind}`, text);
  element.dataset.control = kind;
  $("log").append(element);
  scrollToEnd(true);
}

// The plan panel shows the newest plan.updated of the open session: each one is the whole
// plan, so it replaces the last; the transcript keeps every version where it happened.
const PLAN_MARKS = { pending: "☐", in_progress: "▶", completed: "☑" };

function planEntry(tag, entry) {
  const mark = PLAN_MARKS[entry.status] || "·";
  const element = node(tag, `plan-entry ${entry.status}`, `${mark} ${entry.text}`);
  element.dataset.status = entry.status;
  return element;
}

function showPlan(entries) {
  $("plan-entries").replaceChildren(...entries.map((entry) => planEntry("li", entry)));
  $("plan").hidden = entries.length === 0;
}

function render(envelope) {
  const data = envelope.data || {};
  switch (envelope.type) {
    case "session.created": {
      const model = data.model ? `, model ${data.model}` : "";
      const tree = data.repository
        ? `, a worktree of ${data.repository} on ${data.branch} at ${(data.base || "").slice(0, 12)}`
        : "";
      return line(
        envelope,
        "meta",
        `Session created on ${data.provider} in ${data.workspace}${tree} ` +
          `(approvals: ${data.approval_mode}${model}).`,
      );
    }
    case "session.forked":
      return sessionForked(envelope, data);
    case "session.provider_selected": {
      const skipped = (data.skipped || []).map((s) => `${s.provider}: ${s.reason}`).join("; ");
      const tail = skipped ? ` Skipped: ${skipped}.` : "";
      return line(envelope, "meta", `Provider ${data.provider} (${data.reason}).${tail}`);
    }
    case "session.thread_bound":
      return line(envelope, "meta", `Thread ${data.thread_id}.`);
    case "session.closed":
      return line(envelope, "notice closed", `Session closed (${data.reason}).`);
    case "session.reverted": {
      const count = (data.files || []).length;
      return line(
        envelope,
        "notice reverted",
        `Workspace reverted to the start of turn ${data.turn_number} by ${data.by}: ` +
          `${count} file(s) put back.`,
      );
    }
    case "turn.started": {
      const element = line(envelope, "msg user");
      element.append(node("div", "who-label", "You"), node("div", "text", data.prompt));
      return element;
    }
    case "message.delta":
    case "reasoning.delta":
      return appendText(envelope, data.text, false);
    case "message.completed":
    case "reasoning.completed":
      return appendText(envelope, data.text, true);
    case "tool.started":
      return toolStarted(envelope, data);
    case "tool.output": {
      const card = toolCard(envelope, data.tool_id);
      card.output.hidden = false;
      return card.output.appendChild(stamp(node("span", null, data.text), envelope));
    }
    case "tool.completed":
      return toolCompleted(envelope, data);
    case "plan.updated": {
      const element = line(envelope, "meta plan");
      element.append(node("div", "who-label", "Plan"));
      for (const entry of data.entries || []) element.append(planEntry("div", entry));
      showPlan(data.entries || []);
      return element;
    }
    case "approval.requested":
      return approvalRequested(envelope, data);
    case "approval.resolved":
      return approvalResolved(envelope, data);
    case "question.asked":
      return questionAsked(envelope, data);
    case "question.resolved":
      return questionResolved(envelope, data);
    case "retry.scheduled": {
      const of = data.max_attempts ? ` of ${data.max_attempts}` : "";
      const when = data.resume_at
        ? ` at ${new Date(data.resume_at).toLocaleTimeString()}, when the limit resets`
        : data.delay_s != null
          ? ` in ${data.delay_s} s`
          : "";
      const by = data.source === "cli" ? "The CLI retries" : "Retrying";
      const why = data.message ? `: ${data.message}` : "";
      return line(
        envelope,
        "notice retry",
        `${by}${when} (attempt ${data.attempt}${of}) after ${data.kind}${why}`,
      );
    }
    case "provider.switched":
      return line(
        envelope,
        "notice switched",
        `Switched provider: ${data.from_provider} → ${data.to_provider} (${data.reason})` +
          (data.handoff && data.handoff.turns
            ? `, handing over ${data.handoff.turns} earlier turn(s).`
            : "."),
      );
    case "budget.reached": {
      const whose =
        {
          session: "The session's budget",
          key_daily: `Key ${data.key}'s budget for today`,
          key_monthly: `Key ${data.key}'s budget for this month`,
        }[data.budget] || "A budget";
      const amount = data.measure === "cost_usd" ? `$${data.limit}` : `${data.limit} tokens`;
      return line(envelope, "notice warning", `${whose} of ${amount} is spent (${data.used} used).`);
    }
    case "usage": {
      // Repeated on the turn's end line; kept (hidden) so every event has its element.
      const element = line(envelope, "meta usage", `Usage: ${usageText(data.usage)}.`);
      element.hidden = true;
      return element;
    }
    case "warning": {
      const code = data.code ? ` (${data.code})` : "";
      return line(envelope, "notice warning", `Warning${code}: ${data.message}`);
    }
    case "turn.completed":
      return turnCompleted(envelope, data);
    case "turn.failed":
      return turnFailed(envelope, data.error || {});
    case "turn.interrupted":
      return line(envelope, "turn-end interrupted", `Turn interrupted (${data.reason}).`);
    default:
      return line(envelope, "meta", `${envelope.type}`);
  }
}

function usageText(usage) {
  if (!usage) return "none reported";
  let text = `${usage.input_tokens} in · ${usage.output_tokens} out tokens`;
  if (usage.cached_input_tokens) text += ` · ${usage.cached_input_tokens} cached`;
  if (usage.cost_usd != null) text += ` · $${usage.cost_usd.toFixed(4)}`;
  return text;
}

function textBlock(envelope, messageId, reasoning) {
  const key = `${reasoning ? "r" : "m"}:${messageId}`;
  let block = state.messages.get(key);
  if (!block) {
    const container = turnContainer(envelope);
    if (reasoning) {
      const root = node("details", "reasoning");
      root.append(node("summary", null, "Reasoning"));
      const text = node("div", "text");
      root.append(text);
      block = { root, text };
    } else {
      const root = node("div", "msg agent");
      root.dataset.messageId = messageId;
      root.append(node("div", "who-label", envelope.provider || "Agent"));
      const text = node("div", "text");
      root.append(text);
      block = { root, text };
    }
    container.append(block.root);
    state.messages.set(key, block);
  }
  return block;
}

function appendText(envelope, text, completed) {
  const reasoning = envelope.type.startsWith("reasoning.");
  const block = textBlock(envelope, envelope.data.message_id, reasoning);
  if (!completed) return block.text.appendChild(stamp(node("span", null, text), envelope));
  // The completed text is the whole message: add what the deltas did not carry.
  const parts = [...block.text.children].filter((c) => !c.hidden);
  const shown = parts.map((c) => c.textContent).join("");
  let rest = text;
  if (text.startsWith(shown)) {
    rest = text.slice(shown.length);
  } else {
    for (const part of parts) part.hidden = true; // superseded by the full text
  }
  block.root.classList.add("done");
  return block.text.appendChild(stamp(node("span", null, rest), envelope));
}

function toolCard(envelope, toolId) {
  let card = state.tools.get(toolId);
  if (!card) {
    const root = node("section", "tool");
    root.dataset.toolId = toolId;
    const head = node("div", "tool-head");
    const name = node("span", "tool-name", "tool");
    const status = node("span", "badge running", "running");
    head.append(name, status);
    const input = node("pre", "tool-input");
    const output = node("pre", "tool-output");
    output.hidden = true;
    output.setAttribute("aria-label", "Tool output");
    root.append(head, input, output);
    turnContainer(envelope).append(root);
    card = { root, name, status, input, output };
    state.tools.set(toolId, card);
  }
  return card;
}

function toolStarted(envelope, data) {
  const card = toolCard(envelope, data.tool_id);
  stamp(card.root, envelope);
  card.name.textContent = `${data.name} (${data.kind})`;
  const command = typeof data.input?.command === "string" ? data.input.command : null;
  card.input.textContent = command !== null ? `$ ${command}` : pretty(data.input);
  return card.root;
}

function toolCompleted(envelope, data) {
  const card = toolCard(envelope, data.tool_id);
  card.status.textContent = data.status;
  card.status.className = `badge ${data.status === "completed" ? "ok" : "bad"}`;
  const exit = data.exit_code != null ? ` · exit code ${data.exit_code}` : "";
  const result = stamp(node("div", "tool-result", `Tool ${data.status}${exit}`), envelope);
  if (data.output && !card.output.textContent) {
    card.output.hidden = false;
    card.output.textContent = data.output;
  }
  card.root.append(result);
  return result;
}

function approvalRequested(envelope, data) {
  const root = stamp(node("section", "approval pending"), envelope);
  root.dataset.approvalId = data.approval_id;
  root.setAttribute("aria-label", `Approval for ${data.tool}`);
  const title = node("div", "approval-title");
  title.append(node("span", null, `Approval needed: ${data.tool}`));
  if (data.title) title.append(node("span", "approval-subtitle", data.title));
  root.append(title);
  const command = typeof data.input?.command === "string" ? `$ ${data.input.command}` : null;
  root.append(node("pre", "tool-input", command ?? pretty(data.input)));
  const actions = node("div", "approval-actions");
  const messageId = `approval-message-${data.approval_id}`;
  const label = node("label", null, "Message to the agent (optional)");
  label.htmlFor = messageId;
  const message = node("input");
  message.id = messageId;
  message.type = "text";
  message.autocomplete = "off";
  const options = data.options?.length
    ? data.options
    : [
        { decision: "allow", label: "Allow" },
        { decision: "deny", label: "Deny" },
      ];
  const buttons = options.map((option) => {
    const button = node("button", `decision ${option.decision}`, option.label);
    button.type = "button";
    button.dataset.decision = option.decision;
    button.addEventListener("click", () => decide(data.approval_id, option.decision));
    return button;
  });
  actions.append(...buttons);
  const fields = node("div", "approval-message");
  fields.append(label, message);
  const error = node("p", "error");
  error.setAttribute("role", "alert");
  const resolution = node("p", "resolution");
  root.append(fields, actions, error, resolution);
  turnContainer(envelope).append(root);
  state.approvals.set(data.approval_id, { root, buttons, message, error, resolution, fields });
  if (state.live && !$("prompt").value) buttons[0]?.focus();
  return root;
}

async function decide(approvalId, decision) {
  const card = state.approvals.get(approvalId);
  if (!card || !state.session) return;
  const generation = state.generation;
  for (const button of card.buttons) button.disabled = true;
  card.error.textContent = "";
  const body = { decision };
  if (card.message.value.trim()) body.message = card.message.value.trim();
  try {
    await api(sessionPath(state.session.id, `/approvals/${encodeURIComponent(approvalId)}`), {
      method: "POST",
      body,
    });
  } catch (error) {
    if (generation !== state.generation) return;
    card.error.textContent = describe(error);
    if (!(error instanceof ApiError && error.status === 409)) {
      for (const button of card.buttons) button.disabled = false;
    }
    return;
  }
  if (generation === state.generation) $("prompt").focus();
}

function approvalResolved(envelope, data) {
  const card = state.approvals.get(data.approval_id);
  const verdict = data.decision === "deny" ? "Denied" : "Allowed";
  const why = data.reason === "decided" ? `by the ${data.by}` : data.reason.replace("_", " ");
  const said = data.message ? `: ${data.message}` : "";
  // An edit is shown as what runs: the human who answered must see the tool's real input.
  const edited = data.updated_input
    ? `; input edited by ${data.updated_by || "the client"} to ${JSON.stringify(data.updated_input)}`
    : "";
  const text = `${verdict} (${why})${said}${edited}`;
  if (!card) return line(envelope, "notice", `Approval ${data.approval_id}: ${text}`);
  card.root.classList.remove("pending");
  card.root.classList.add(data.decision === "deny" ? "denied" : "allowed");
  for (const button of card.buttons) button.remove();
  card.fields.remove();
  card.error.textContent = "";
  return card.resolution.appendChild(stamp(node("span", null, text), envelope));
}

// A question card: one fieldset per question (radio buttons for one choice, checkboxes for
// several, a text box where the agent takes an answer of the user's own), one Answer button.
function questionAsked(envelope, data) {
  const root = stamp(node("section", "approval question pending"), envelope);
  root.dataset.questionId = data.question_id;
  root.setAttribute("aria-label", "Question from the agent");
  const title = node("div", "approval-title");
  title.append(node("span", null, "The agent asks"));
  root.append(title);
  const fields = node("div", "question-fields");
  const inputs = data.questions.map((question, index) => {
    const set = node("fieldset", "question-set");
    const legend = node("legend", null, question.prompt);
    if (question.header) legend.prepend(node("span", "question-header", question.header));
    set.append(legend);
    const name = `question-${data.question_id}-${index}`;
    const choices = (question.options || []).map((option, position) => {
      const choice = node("input");
      choice.type = question.multi_select ? "checkbox" : "radio";
      choice.name = name;
      choice.value = option.label;
      choice.id = `${name}-${position}`;
      const label = node("label", "question-option");
      label.htmlFor = choice.id;
      label.append(choice, node("span", null, option.label));
      if (option.description) label.append(node("span", "approval-subtitle", option.description));
      set.append(label);
      return choice;
    });
    let text = null;
    if (question.free_text) {
      text = node("input", "question-text");
      text.type = "text";
      text.autocomplete = "off";
      text.id = `${name}-text`;
      text.placeholder = "Your own answer (optional)";
      text.setAttribute("aria-label", `Your own answer to: ${question.prompt}`);
      set.append(text);
    }
    fields.append(set);
    return { choices, text };
  });
  const actions = node("div", "approval-actions");
  const button = node("button", "decision allow", "Answer");
  button.type = "button";
  button.addEventListener("click", () => answerQuestion(data.question_id));
  actions.append(button);
  const error = node("p", "error");
  error.setAttribute("role", "alert");
  const resolution = node("p", "resolution");
  root.append(fields, actions, error, resolution);
  turnContainer(envelope).append(root);
  state.questions.set(data.question_id, {
    root,
    inputs,
    button,
    fields,
    actions,
    error,
    resolution,
    questions: data.questions,
  });
  return root;
}

async function answerQuestion(questionId) {
  const card = state.questions.get(questionId);
  if (!card || !state.session) return;
  const generation = state.generation;
  card.button.disabled = true;
  card.error.textContent = "";
  const answers = card.inputs.map(({ choices, text }) => {
    const answer = { selected: choices.filter((c) => c.checked).map((c) => c.value) };
    if (text && text.value.trim()) answer.text = text.value.trim();
    return answer;
  });
  try {
    await api(sessionPath(state.session.id, `/questions/${encodeURIComponent(questionId)}`), {
      method: "POST",
      body: { answers },
    });
  } catch (error) {
    if (generation !== state.generation) return;
    card.error.textContent = describe(error);
    if (!(error instanceof ApiError && error.status === 409)) card.button.disabled = false;
    return;
  }
  if (generation === state.generation) $("prompt").focus();
}

function questionResolved(envelope, data) {
  const card = state.questions.get(data.question_id);
  const why = data.reason === "answered" ? "" : ` (${data.reason.replace("_", " ")})`;
  let text = `Not answered${why}`;
  if (data.answers) {
    const asked = card?.questions || [];
    const parts = data.answers.map((answer, index) => {
      const given = [...answer.selected, ...(answer.text ? [answer.text] : [])].join(", ");
      return asked[index] ? `${asked[index].prompt} → ${given}` : given;
    });
    text = `Answered by ${data.answered_by || "the client"}: ${parts.join("; ")}`;
  }
  if (!card) return line(envelope, "notice", `Question ${data.question_id}: ${text}`);
  card.root.classList.remove("pending");
  card.root.classList.add(data.answers ? "allowed" : "denied");
  card.fields.remove();
  card.actions.remove();
  card.error.textContent = "";
  return card.resolution.appendChild(stamp(node("span", null, text), envelope));
}

function turnCompleted(envelope, data) {
  const turn = turnContainer(envelope);
  if (data.final_text && !turn.querySelector(".msg.agent")) {
    const root = node("div", "msg agent");
    root.append(node("div", "who-label", envelope.provider || "Agent"));
    root.append(node("div", "text", data.final_text));
    turn.append(root);
  }
  const usage = data.usage ? ` · ${usageText(data.usage)}` : "";
  const element = line(envelope, "turn-end completed", `Turn completed${usage}.`);
  if (data.changes && data.changes.files > 0) element.append(changesPanel(envelope, data.changes));
  element.append(turnActions(envelope.turn_id));
  return element;
}

// --- forking at a turn ---------------------------------------------------------------------

function turnActions(turnId) {
  const actions = node("div", "turn-actions");
  const fork = node("button", "small fork", "Fork from this turn");
  fork.type = "button";
  fork.title = "A new session with this turn's files and the conversation up to it";
  const error = node("p", "error");
  error.setAttribute("role", "alert");
  fork.addEventListener("click", () => forkAt(turnId, fork, error));
  actions.append(fork, error);
  return actions;
}

async function forkAt(turnId, button, error) {
  if (!state.session) return;
  const generation = state.generation;
  button.disabled = true;
  error.textContent = "";
  let fork;
  try {
    fork = await api(sessionPath(state.session.id, "/fork"), {
      method: "POST",
      body: { at_turn: turnId },
    });
  } catch (failure) {
    if (generation !== state.generation) return;
    error.textContent = describe(failure);
    button.disabled = false;
    return;
  }
  button.disabled = false;
  location.hash = `session=${fork.id}`; // opens the new session (hashchange)
  loadSessions().catch(() => {});
}

// Told on both sessions: the fork says where it came from, the forked one links to the fork.
function sessionForked(envelope, data) {
  const how = data.conversation === "native" ? "the agent's own fork" : "a hand-off";
  const element = line(envelope, "notice forked");
  if (data.child_id === envelope.session_id) {
    state.forkedAtNumber = data.turn_number;
    if (state.session?.id === data.child_id) showSession();
    const parent = node("a", "session-link", data.parent_id);
    parent.href = `#session=${data.parent_id}`;
    element.append(
      "Forked from ",
      parent,
      ` at turn ${data.turn_number} (conversation: ${how}).`,
    );
  } else {
    const child = node("a", "session-link", data.child_id);
    child.href = `#session=${data.child_id}`;
    element.append(`Forked at turn ${data.turn_number} into `, child, ` (conversation: ${how}).`);
  }
  return element;
}

// --- what a turn changed ---------------------------------------------------------------------

function changesPanel(envelope, changes) {
  const turnId = envelope.turn_id;
  const panel = node("details", "changes");
  panel.dataset.turnId = turnId;
  panel.append(
    node(
      "summary",
      null,
      `${changes.files} file(s) changed, +${changes.additions} −${changes.deletions}`,
    ),
  );
  const body = node("div", "changes-body");
  const files = node("ul", "changed-files");
  const diff = node("pre", "diff");
  const error = node("p", "error");
  error.setAttribute("role", "alert");
  const revert = node("button", "small revert", "Revert to before this turn");
  revert.type = "button";
  revert.addEventListener("click", () => revertTo(turnId, revert, error));
  body.append(files, diff, revert, error);
  panel.append(body);
  let loaded = false;
  panel.addEventListener("toggle", () => {
    if (!panel.open || loaded) return;
    loaded = true;
    loadChanges(turnId, files, diff, error).catch(() => {
      loaded = false;
    });
  });
  return panel;
}

async function loadChanges(turnId, files, diff, error) {
  const query = `?from=${encodeURIComponent(turnId)}&to=${encodeURIComponent(turnId)}`;
  try {
    const found = await api(sessionPath(state.session.id, `/changes${query}`));
    files.replaceChildren(
      ...found.files.map((file) => {
        const item = node("li", `changed ${file.status}`);
        const counts = file.binary ? "binary" : `+${file.additions} −${file.deletions}`;
        const from = file.old_path ? ` (from ${file.old_path})` : "";
        item.append(node("code", null, file.path), node("span", null, ` ${file.status}${from} · ${counts}`));
        return item;
      }),
    );
    diff.replaceChildren(
      ...found.diff.split("\n").map((text) => {
        const kind = text.startsWith("+") && !text.startsWith("+++")
          ? "added"
          : text.startsWith("-") && !text.startsWith("---")
            ? "removed"
            : text.startsWith("@@")
              ? "hunk"
              : "context";
        return node("span", `diff-line ${kind}`, `${text}\n`);
      }),
    );
  } catch (failure) {
    error.textContent = describe(failure);
    throw failure;
  }
}

async function revertTo(turnId, button, error) {
  // Two clicks: the first asks, the second reverts (what changed since is lost).
  if (button.dataset.armed !== "yes") {
    button.dataset.armed = "yes";
    button.textContent = "Click again to revert the files";
    return;
  }
  button.dataset.armed = "";
  button.disabled = true;
  error.textContent = "";
  try {
    await api(sessionPath(state.session.id, "/revert"), { method: "POST", body: { to_turn: turnId } });
    button.textContent = "Reverted";
  } catch (failure) {
    error.textContent = describe(failure);
    button.textContent = "Revert to before this turn";
    button.disabled = false;
  }
}

function turnFailed(envelope, error) {
  const element = line(envelope, "turn-end failed");
  const reason = error.reason ? ` (${error.reason})` : "";
  element.append(node("strong", null, `Turn failed: ${error.kind}${reason}`));
  element.append(node("div", "failure-message", error.message));
  const facts = [];
  if (error.provider) facts.push(`provider ${error.provider}`);
  if (error.exit_code != null) facts.push(`exit code ${error.exit_code}`);
  facts.push(error.retryable ? "retryable" : "not retryable");
  element.append(node("div", "meta", facts.join(" · ")));
  if (error.stderr_tail) element.append(node("pre", "stderr", error.stderr_tail));
  return element;
}

function isAtEnd() {
  const log = $("log");
  return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
}

function scrollToEnd(follow) {
  if (follow) $("log").scrollTop = $("log").scrollHeight;
}

// --- turns -----------------------------------------------------------------------------------

async function sendPrompt() {
  const prompt = $("prompt").value;
  if (!prompt.trim() || !state.session || $("send").disabled) return;
  showError("turn-error", "");
  $("send").disabled = true;
  try {
    await api(sessionPath(state.session.id, "/turns"), { method: "POST", body: { prompt } });
    $("prompt").value = "";
  } catch (error) {
    showError("turn-error", describe(error));
  } finally {
    updateControls();
  }
}

async function interrupt() {
  if (!state.session || !state.activeTurn) return;
  showError("turn-error", "");
  try {
    await api(sessionPath(state.session.id, "/interrupt"), { method: "POST" });
  } catch (error) {
    showError("turn-error", describe(error));
  }
}

async function closeSession() {
  if (!state.session) return;
  try {
    await api(sessionPath(state.session.id), { method: "DELETE" });
    await loadSessions();
  } catch (error) {
    showError("turn-error", describe(error));
  }
}

// --- wiring ----------------------------------------------------------------------------------

function wire() {
  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    showError("signin-error", "");
    try {
      await signIn(token);
    } catch (error) {
      state.token = null;
      const refused = error instanceof ApiError && error.status === 401;
      showError("signin-error", refused ? "The gateway refused this key." : describe(error));
    }
  });
  $("sign-out").addEventListener("click", () => signOut(""));
  $("providers-refresh").addEventListener("click", () =>
    loadProviders(true).catch((error) => showError("create-error", describe(error))),
  );
  $("sessions-refresh").addEventListener("click", () =>
    loadSessions().catch((error) => showError("create-error", describe(error))),
  );
  for (const radio of document.querySelectorAll('input[name="place"]')) {
    radio.addEventListener("change", choosePlace);
  }
  choosePlace(); // a reload may bring back the choice made before it
  $("new-session").addEventListener("submit", (event) => {
    event.preventDefault();
    createSession(event.target);
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    sendPrompt();
  });
  $("prompt").addEventListener("keydown", (event) => {
    const plain = !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey;
    if (event.key === "Enter" && plain && !event.isComposing) {
      event.preventDefault();
      sendPrompt();
    }
  });
  $("interrupt").addEventListener("click", interrupt);
  $("close-session").addEventListener("click", closeSession);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.activeTurn && !$("app").hidden) {
      event.preventDefault();
      interrupt();
    }
  });
  window.addEventListener("hashchange", () => {
    const id = sessionFromHash();
    if (id && state.token && id !== state.session?.id) openSession(id);
  });
}

async function start() {
  wire();
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (!saved) {
    $("token").focus();
    return;
  }
  try {
    await signIn(saved);
  } catch (error) {
    if (state.token) signOut(describe(error));
  }
}

start();
