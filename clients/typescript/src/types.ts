/** Friendly names for the contract's types (src/openapi.ts, generated from docs/openapi.json). */
import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];

/**
 * A request body: the contract gives every field with a default as present in answers, which
 * a caller may leave out; `Required` names the fields it must send.
 */
type Body<T, Required extends keyof T = never> = Partial<T> & Pick<T, Required>;

export type Session = Schemas["SessionPublic"];
export type SessionCreate = Body<Schemas["SessionCreate"]>;
export type SessionList = Schemas["SessionList"];
export type SessionStatus = Session["status"];
export type SessionForkCreate = Body<Schemas["SessionForkCreate"]>;
export type Turn = Schemas["TurnPublic"];
export type TurnCreate = Body<Schemas["TurnCreate"], "prompt">;
export type TurnStatus = Turn["status"];
export type Approval = Schemas["ApprovalPublic"];
export type ApprovalRespond = Body<Schemas["ApprovalRespond"], "decision">;
export type Question = Schemas["QuestionPublic"];
export type QuestionReply = { answers: Body<Schemas["QuestionAnswerIn"]>[] };
export type Provider = Schemas["ProviderPublic"];
export type Changes = Schemas["ChangesPublic"];
export type ChangedFile = Schemas["ChangedFile"];
export type Revert = Schemas["RevertPublic"];
export type RevertCreate = Body<Schemas["RevertCreate"], "to_turn">;
export type RunCreate = Body<Schemas["RunCreate"], "workspace" | "prompt">;
export type RunResult = Schemas["RunResult"];
export type UsageReport = Schemas["UsageReport"];
export type Usage = Schemas["Usage"];
export type EventPage = Schemas["EventPage"];
export type InterruptAccepted = Schemas["InterruptAccepted"];

/** One event of a session's stream: the envelope, discriminated by `type`. */
export type GatewayEvent = EventPage["events"][number];
export type EventType = GatewayEvent["type"];
/** The event of one type: `EventOf<"message.delta">["data"]["text"]`. */
export type EventOf<T extends EventType> = Extract<GatewayEvent, { type: T }>;

export type ListSessionsQuery = NonNullable<operations["listSessions"]["parameters"]["query"]>;
export type ChangesQuery = NonNullable<operations["getChanges"]["parameters"]["query"]>;
export type UsageQuery = NonNullable<operations["getUsage"]["parameters"]["query"]>;

/**
 * A control frame of the stream (never an event: no `seq`). `resync_required`: events after
 * the cursor were pruned, the stream goes on from `first_seq`; `evicted`: the stream ended
 * (the client fell behind, or its key was rotated away); `shutdown`: the gateway is stopping;
 * `degraded` / `recovered`: events come late from the store / live again.
 */
export type ControlFrame =
  | { type: "resync_required"; first_seq: number; after: number }
  | { type: "evicted"; last_seq_sent: number; reason: string }
  | { type: "shutdown"; reason: string; retry_ms: number }
  | { type: "degraded"; reason: string; poll_ms: number }
  | { type: "recovered" };
