/**
 * A session's events as an async iterator over SSE that survives disconnects.
 *
 * Lifecycle of one `streamEvents` loop:
 *
 *   connect (Last-Event-ID = last seq yielded) ──200──► read messages ──end/cut──┐
 *        ▲    ──204──► done (the session is closed and everything was read)       │
 *        │    ──429/503──► wait Retry-After ─┐                                    │
 *        │    ──other 4xx──► throw GatewayError                                   │
 *        └──────────── wait (retry_ms of `shutdown`, else a growing 1–5 s) ◄──────┘
 *
 * An event whose `seq` is not above the last one yielded is dropped, so a reconnect (or a
 * gateway that replays) never yields an event twice. Control frames are yielded as they come;
 * `resync_required` moves the cursor past the events that are gone.
 */
import { errorFrom, GatewayError } from "./errors.js";
import { parseSse } from "./sse.js";
import type { ControlFrame, GatewayEvent } from "./types.js";

/** What the stream yields: an event, a control frame, or a change of the connection. */
export type StreamItem =
  | { kind: "event"; event: GatewayEvent }
  | { kind: "control"; frame: ControlFrame }
  | { kind: "connected" }
  | { kind: "disconnected"; retryInMs: number; error: unknown };

export interface StreamOptions {
  /** Start after this seq (default 0: the whole history, then live). */
  after?: number;
  /** Stop the stream: the iterator ends without an error. */
  signal?: AbortSignal;
  /** Reconnect delays while the gateway cannot be reached (ms; default 1 s growing to 5 s). */
  minRetryMs?: number;
  maxRetryMs?: number;
}

export interface StreamTransport {
  url(path: string): string;
  headers(extra?: Record<string, string>): Record<string, string>;
  fetch: typeof fetch;
}

const CONTROL_TYPES = new Set(["resync_required", "evicted", "shutdown", "degraded", "recovered"]);
const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

export async function* streamEvents(
  transport: StreamTransport,
  path: string,
  options: StreamOptions = {},
): AsyncGenerator<StreamItem> {
  const { signal } = options;
  const minRetry = options.minRetryMs ?? 1000;
  const maxRetry = options.maxRetryMs ?? 5000;
  let cursor = options.after ?? 0;
  let failures = 0;
  while (!signal?.aborted) {
    let response: Response;
    let wait = Math.min(maxRetry, minRetry * 2 ** failures);
    try {
      const extra: Record<string, string> = { Accept: "text/event-stream" };
      if (cursor > 0) extra["Last-Event-ID"] = String(cursor);
      const init: RequestInit = { headers: transport.headers(extra), cache: "no-store" };
      if (signal) init.signal = signal;
      response = await transport.fetch(transport.url(path), init);
    } catch (error) {
      if (signal?.aborted) return;
      failures += 1;
      yield { kind: "disconnected", retryInMs: wait, error };
      await pause(wait, signal);
      continue;
    }
    if (response.status === 204) return;
    if (!response.ok || !response.body) {
      const error = await errorFrom(response);
      if (!RETRYABLE_STATUSES.has(response.status)) throw error;
      failures += 1;
      if (error.retryAfterS !== null) wait = Math.max(wait, error.retryAfterS * 1000);
      yield { kind: "disconnected", retryInMs: wait, error };
      await pause(wait, signal);
      continue;
    }
    yield { kind: "connected" };
    let ended: unknown = null;
    let received = false;
    let told = false; // a shutdown or evicted frame said when to come back
    try {
      for await (const message of parseSse(response.body, String(cursor))) {
        if (message.event === "message") {
          const event = JSON.parse(message.data) as GatewayEvent;
          if (event.seq <= cursor) continue; // already yielded: a replay after a reconnect
          cursor = event.seq;
          failures = 0;
          received = true;
          yield { kind: "event", event };
          continue;
        }
        if (!CONTROL_TYPES.has(message.event)) continue; // a frame this client does not know
        const frame = JSON.parse(message.data) as ControlFrame;
        if (frame.type === "resync_required") cursor = Math.max(cursor, frame.first_seq - 1);
        yield { kind: "control", frame };
        if (frame.type === "shutdown") wait = Math.max(frame.retry_ms, 0);
        if (frame.type === "evicted") wait = 0;
        if (frame.type === "shutdown" || frame.type === "evicted") {
          told = true;
          break;
        }
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (error instanceof SyntaxError) throw error; // not the gateway's stream
      ended = error;
      failures += 1;
    }
    if (signal?.aborted) return;
    // A stream that ended cleanly after events is asked again at once: a closed session's
    // stream ends after its last event, and the next request says so (204).
    if (ended === null && received && !told) wait = 0;
    yield { kind: "disconnected", retryInMs: wait, error: ended };
    await pause(wait, signal);
  }
}

export { GatewayError };
