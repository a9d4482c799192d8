/**
 * One open session: its record, its transcript (folded from the stream, each event once) and
 * the stream's state. The view is told of changes at most once per animation frame, so a
 * storm of deltas costs one render a frame, not one per event.
 */
import type { ControlFrame, GatewayEvent, Session } from "@agent-gateway/client";

import { describe, gateway } from "./gateway";
import { Store } from "./store";
import { TranscriptBuilder, type Transcript } from "./transcript";

export type StreamState = "connecting" | "live" | "reconnecting" | "delayed" | "ended";

export interface LiveState {
  session: Session;
  transcript: Transcript;
  stream: StreamState;
  /** A line about the stream the reader should know (a gap, the gateway stopping). */
  streamNote: { control: ControlFrame["type"]; text: string } | null;
  error: string | null;
}

const ENDED = new Set(["closed", "failed"]);

/** The session's status as its events tell it (the record is read once, when it opens). */
function statusAfter(status: Session["status"], event: GatewayEvent, t: Transcript): Session["status"] {
  if (event.type === "session.closed") return "closed";
  if (ENDED.has(status)) return status;
  if (t.pending.length > 0) return "awaiting_approval";
  const last = t.turns[t.turns.length - 1];
  if (!last || last.status !== "running") return "idle";
  if (event.type === "retry.scheduled") return "retrying";
  return status === "retrying" && event.type === "usage" ? "retrying" : "running";
}

export class LiveSession {
  readonly store: Store<LiveState>;
  readonly #builder = new TranscriptBuilder();
  readonly #abort = new AbortController();
  #frame = 0;

  constructor(session: Session) {
    this.store = new Store<LiveState>({
      session,
      transcript: this.#builder.t,
      stream: "connecting",
      streamNote: null,
      error: null,
    });
  }

  get id(): string {
    return this.store.value.session.id;
  }

  start(): void {
    void this.#run();
  }

  stop(): void {
    this.#abort.abort();
    cancelAnimationFrame(this.#frame);
  }

  #changed(): void {
    if (this.#frame) return;
    this.#frame = requestAnimationFrame(() => {
      this.#frame = 0;
      this.store.notify();
    });
  }

  #patch(patch: Partial<LiveState>): void {
    Object.assign(this.store.value, patch);
    this.#changed();
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    try {
      for await (const item of gateway().stream(this.id, { signal })) {
        switch (item.kind) {
          case "event":
            this.#event(item.event);
            break;
          case "control":
            this.#control(item.frame);
            break;
          case "connected":
            if (this.store.value.stream !== "delayed") this.#patch({ stream: "live", streamNote: null });
            break;
          case "disconnected":
            this.#patch({ stream: "reconnecting" });
            break;
        }
      }
      if (!signal.aborted) this.#patch({ stream: "ended" });
    } catch (error) {
      if (!signal.aborted) this.#patch({ stream: "ended", error: describe(error) });
    }
  }

  #event(event: GatewayEvent): void {
    if (!this.#builder.apply(event)) return;
    const session = this.store.value.session;
    session.status = statusAfter(session.status, event, this.#builder.t);
    session.last_seq = event.seq;
    this.#changed();
  }

  #control(frame: ControlFrame): void {
    switch (frame.type) {
      case "resync_required":
        this.#patch({
          streamNote: {
            control: frame.type,
            text: `Events ${frame.after + 1}–${frame.first_seq - 1} are no longer kept; the log goes on from ${frame.first_seq}.`,
          },
        });
        break;
      case "shutdown":
        this.#patch({
          stream: "reconnecting",
          streamNote: { control: frame.type, text: "The gateway is shutting down; reconnecting when it is back." },
        });
        break;
      case "evicted":
        this.#patch({ stream: "reconnecting" });
        break;
      case "degraded":
        this.#patch({
          stream: "delayed",
          streamNote: { control: frame.type, text: "Events arrive late (read from the store) until the gateway recovers." },
        });
        break;
      case "recovered":
        this.#patch({ stream: "live", streamNote: null });
        break;
    }
  }

  async refresh(): Promise<void> {
    try {
      const session = await gateway().getSession(this.id);
      session.last_seq = Math.max(session.last_seq, this.store.value.session.last_seq);
      this.#patch({ session });
    } catch {
      // The stream says what matters; a failed refresh changes nothing shown.
    }
  }
}
