/** The gateway's REST API as typed calls, and its event stream as an async iterator. */
import { errorFrom } from "./errors.js";
import { streamEvents, type StreamItem, type StreamOptions } from "./stream.js";
import type {
  Approval,
  ApprovalRespond,
  Changes,
  ChangesQuery,
  EventPage,
  GatewayEvent,
  InterruptAccepted,
  ListSessionsQuery,
  Provider,
  Question,
  QuestionReply,
  Revert,
  RevertCreate,
  RunCreate,
  RunResult,
  Session,
  SessionCreate,
  SessionForkCreate,
  SessionList,
  Turn,
  TurnCreate,
  UsageQuery,
  UsageReport,
} from "./types.js";

export interface ClientOptions {
  /** The gateway's address, e.g. `http://127.0.0.1:8765` (default: this page's origin). */
  baseUrl?: string;
  /** The bearer key (`server.api_keys`, or the token the gateway generated). */
  token: string;
  /** A `fetch` to use instead of the global one (a proxy agent, a test double of the network). */
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | null | undefined>;

const encode = encodeURIComponent;

/** A client for one gateway and one key. Every method throws `GatewayError` on a problem. */
export class GatewayClient {
  readonly baseUrl: string;
  #token: string;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    const origin = typeof location === "undefined" ? "" : location.origin;
    this.baseUrl = (options.baseUrl ?? origin).replace(/\/+$/, "");
    this.#token = options.token;
    // Bound: a browser's fetch called as a method of another object throws "Illegal invocation".
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  url(path: string, query: Query = {}): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined && value !== null) params.set(name, String(value));
    }
    const search = params.toString();
    return `${this.baseUrl}${path}${search ? `?${search}` : ""}`;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { Authorization: `Bearer ${this.#token}`, ...extra };
  }

  /** One request; the JSON answer, or `undefined` for 204. */
  async request<T>(
    method: string,
    path: string,
    { query, body }: { query?: Query; body?: unknown } = {},
  ): Promise<T> {
    const init: RequestInit = { method, headers: this.headers({ Accept: "application/json" }) };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = this.headers({ Accept: "application/json", "Content-Type": "application/json" });
    }
    const response = await this.#fetch(this.url(path, query), init);
    if (!response.ok) throw await errorFrom(response);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  // --- providers -------------------------------------------------------------------------

  async listProviders(options: { fresh?: boolean } = {}): Promise<Provider[]> {
    const list = await this.request<{ providers: Provider[] }>("GET", "/v1/providers", {
      query: { fresh: options.fresh },
    });
    return list.providers;
  }

  getProvider(name: string, options: { fresh?: boolean } = {}): Promise<Provider> {
    return this.request("GET", `/v1/providers/${encode(name)}`, { query: { fresh: options.fresh } });
  }

  // --- sessions --------------------------------------------------------------------------

  createSession(body: SessionCreate): Promise<Session> {
    return this.request("POST", "/v1/sessions", { body });
  }

  /** One page of sessions, newest first; pass the last `created_at` as `before` for the next. */
  listSessions(query: ListSessionsQuery = {}): Promise<SessionList> {
    return this.request("GET", "/v1/sessions", { query });
  }

  /** Every session, newest first, a page at a time. */
  async *sessions(query: ListSessionsQuery = {}): AsyncGenerator<Session> {
    let before = query.before;
    for (;;) {
      const page = await this.listSessions({ ...query, before });
      if (page.sessions.length === 0) return;
      yield* page.sessions;
      before = page.sessions[page.sessions.length - 1]?.created_at;
    }
  }

  getSession(sessionId: string): Promise<Session> {
    return this.request("GET", `/v1/sessions/${encode(sessionId)}`);
  }

  /** Closes the session (its process stops; its history stays readable). */
  closeSession(sessionId: string): Promise<Session> {
    return this.request("DELETE", `/v1/sessions/${encode(sessionId)}`);
  }

  forkSession(sessionId: string, body: SessionForkCreate = {}): Promise<Session> {
    return this.request("POST", `/v1/sessions/${encode(sessionId)}/fork`, { body });
  }

  revertSession(sessionId: string, body: RevertCreate): Promise<Revert> {
    return this.request("POST", `/v1/sessions/${encode(sessionId)}/revert`, { body });
  }

  /** What changed in the workspace (`from`/`to`: `start`, `now` or a turn id). */
  getChanges(sessionId: string, query: ChangesQuery = {}): Promise<Changes> {
    return this.request("GET", `/v1/sessions/${encode(sessionId)}/changes`, {
      query: { ...query, format: "json" },
    });
  }

  interrupt(sessionId: string): Promise<InterruptAccepted> {
    return this.request("POST", `/v1/sessions/${encode(sessionId)}/interrupt`);
  }

  // --- turns -----------------------------------------------------------------------------

  /** Starts a turn (202): the answer arrives on the event stream. */
  startTurn(sessionId: string, body: TurnCreate | string): Promise<Turn> {
    const turn = typeof body === "string" ? { prompt: body } : body;
    return this.request("POST", `/v1/sessions/${encode(sessionId)}/turns`, { body: turn });
  }

  async listTurns(sessionId: string): Promise<Turn[]> {
    const list = await this.request<{ turns: Turn[] }>(
      "GET",
      `/v1/sessions/${encode(sessionId)}/turns`,
    );
    return list.turns;
  }

  getTurn(sessionId: string, turnId: string): Promise<Turn> {
    return this.request("GET", `/v1/sessions/${encode(sessionId)}/turns/${encode(turnId)}`);
  }

  // --- approvals and questions -----------------------------------------------------------

  async listApprovals(sessionId: string): Promise<Approval[]> {
    const list = await this.request<{ approvals: Approval[] }>(
      "GET",
      `/v1/sessions/${encode(sessionId)}/approvals`,
    );
    return list.approvals;
  }

  respondToApproval(sessionId: string, approvalId: string, body: ApprovalRespond): Promise<Approval> {
    return this.request(
      "POST",
      `/v1/sessions/${encode(sessionId)}/approvals/${encode(approvalId)}`,
      { body },
    );
  }

  async listQuestions(sessionId: string): Promise<Question[]> {
    const list = await this.request<{ questions: Question[] }>(
      "GET",
      `/v1/sessions/${encode(sessionId)}/questions`,
    );
    return list.questions;
  }

  answerQuestion(sessionId: string, questionId: string, body: QuestionReply): Promise<Question> {
    return this.request(
      "POST",
      `/v1/sessions/${encode(sessionId)}/questions/${encode(questionId)}`,
      { body },
    );
  }

  // --- runs and usage --------------------------------------------------------------------

  /** One prompt, one answer: select a provider, run one turn, return its result. */
  run(body: RunCreate): Promise<RunResult> {
    return this.request("POST", "/v1/runs", { body });
  }

  /** Token counts and cost by key, provider and model over `[from, to)` (admin keys: all). */
  usage(query: UsageQuery = {}): Promise<UsageReport> {
    return this.request("GET", "/v1/usage", { query });
  }

  // --- events ----------------------------------------------------------------------------

  /** One JSON page of events after `after`. */
  eventsPage(sessionId: string, query: { after?: number; limit?: number } = {}): Promise<EventPage> {
    return this.request("GET", `/v1/sessions/${encode(sessionId)}/events`, { query });
  }

  /**
   * The session's stream: events (each once, in `seq` order), control frames and connection
   * changes, reconnecting with `Last-Event-ID` until the session is closed and read to its
   * end, or `signal` aborts.
   */
  stream(sessionId: string, options: StreamOptions = {}): AsyncGenerator<StreamItem> {
    return streamEvents(this, `/v1/sessions/${encode(sessionId)}/events`, options);
  }

  /** The session's events only (each once, in order), reconnecting as `stream` does. */
  async *events(sessionId: string, options: StreamOptions = {}): AsyncGenerator<GatewayEvent> {
    for await (const item of this.stream(sessionId, options)) {
      if (item.kind === "event") yield item.event;
    }
  }

  get fetch(): typeof fetch {
    return this.#fetch;
  }
}
