/**
 * A session's events folded into what the console shows (pure: no DOM, no network).
 *
 * Every event lands in exactly one item and leaves its `seq` there, so the view can give each
 * event one element (`data-seq`) and a replayed or reloaded stream shows each once. Internal
 * events (the CLI's thread id, a provider chosen as asked, usage repeated on the turn's end)
 * are kept as hidden marks, not shown as text.
 */
import type { EventOf, GatewayEvent } from "@agent-gateway/client";

type Data<T extends GatewayEvent["type"]> = EventOf<T>["data"];

export interface Usage {
  input: number;
  output: number;
  cached: number;
  cost: number | null;
}

export interface TextItem {
  kind: "text";
  key: string;
  reasoning: boolean;
  text: string;
  seqs: number[];
  completed: boolean;
  v: number;
}

export interface ApprovalItem {
  id: string;
  seq: number;
  tool: string;
  title: string | null;
  input: Record<string, unknown>;
  options: { decision: string; label: string }[];
  expiresAt: string;
  resolved: Data<"approval.resolved"> | null;
  resolvedSeq: number | null;
}

export interface QuestionItem {
  id: string;
  seq: number;
  questions: Data<"question.asked">["questions"];
  resolved: Data<"question.resolved"> | null;
  resolvedSeq: number | null;
}

export interface ToolItem {
  kind: "tool";
  key: string;
  toolId: string;
  name: string;
  toolKind: string;
  input: Record<string, unknown>;
  seqs: number[];
  output: string;
  status: string | null;
  exitCode: number | null;
  approvals: ApprovalItem[];
  question: QuestionItem | null;
  v: number;
}

export type NoticeTone =
  | "retry"
  | "wait"
  | "switched"
  | "warning"
  | "closed"
  | "reverted"
  | "configured"
  | "forked"
  | "selected"
  | "plan";

export interface NoticeItem {
  kind: "notice";
  key: string;
  seq: number;
  tone: NoticeTone;
  text: string;
  /** A session this notice links to (a fork). */
  link: string | null;
  entries?: Data<"plan.updated">["entries"];
  v: number;
}

export interface PromptItem {
  kind: "prompt";
  key: string;
  seq: number;
  text: string;
  v: number;
}

export interface EndItem {
  kind: "end";
  key: string;
  seq: number;
  status: "completed" | "failed" | "interrupted";
  turnId: string;
  usage: Usage | null;
  changes: { files: number; additions: number; deletions: number } | null;
  error: Data<"turn.failed">["error"] | null;
  reason: string | null;
  v: number;
}

export interface HiddenItem {
  kind: "hidden";
  key: string;
  seq: number;
  type: string;
  v: number;
}

export type Item = TextItem | ToolItem | NoticeItem | PromptItem | EndItem | HiddenItem;

export interface Turn {
  id: string;
  number: number;
  items: Item[];
  status: "running" | "completed" | "failed" | "interrupted";
  v: number;
}

export interface Transcript {
  /** Items before any turn (a fork's notice, a revert outside a turn). */
  head: Item[];
  turns: Turn[];
  plan: Data<"plan.updated">["entries"] | null;
  /** This session's origin, when it is a fork (from its `session.forked` event). */
  forkedFrom: { parent: string; turnNumber: number } | null;
  /** The first prompt, which names a session without a title. */
  firstPrompt: string | null;
  usage: Usage;
  lastSeq: number;
  /** Approvals and questions waiting for an answer, oldest first. */
  pending: { approval?: ApprovalItem; question?: QuestionItem; tool: ToolItem }[];
  version: number;
  tools: Map<string, ToolItem>;
  texts: Map<string, TextItem>;
  approvals: Map<string, { approval: ApprovalItem; tool: ToolItem }>;
  questions: Map<string, { question: QuestionItem; tool: ToolItem }>;
  turnIndex: Map<string, Turn>;
}

export function emptyTranscript(): Transcript {
  return {
    head: [],
    turns: [],
    plan: null,
    forkedFrom: null,
    firstPrompt: null,
    usage: { input: 0, output: 0, cached: 0, cost: null },
    lastSeq: 0,
    pending: [],
    version: 0,
    tools: new Map(),
    texts: new Map(),
    approvals: new Map(),
    questions: new Map(),
    turnIndex: new Map(),
  };
}

/** Tools whose input is shown another way (the plan panel, the question card). */
const PLAN_TOOLS = new Set(["TodoWrite", "todowrite", "update_plan", "todo_write"]);
const QUESTION_TOOLS = new Set(["AskUserQuestion", "question", "ask_user_question"]);

export function isPlanTool(name: string): boolean {
  return PLAN_TOOLS.has(name);
}
export function isQuestionTool(name: string): boolean {
  return QUESTION_TOOLS.has(name);
}

function addUsage(total: Usage, usage: Data<"usage">["usage"]): void {
  total.input += usage.input_tokens;
  total.output += usage.output_tokens;
  total.cached += usage.cached_input_tokens;
  if (usage.cost_usd != null) total.cost = (total.cost ?? 0) + usage.cost_usd;
}

function toUsage(usage: Data<"usage">["usage"] | null | undefined): Usage | null {
  if (!usage) return null;
  return {
    input: usage.input_tokens,
    output: usage.output_tokens,
    cached: usage.cached_input_tokens,
    cost: usage.cost_usd ?? null,
  };
}

const KIND_WORDS: Record<string, string> = {
  rate_limited: "the provider's rate limit",
  overloaded: "the provider being overloaded",
  server_error: "a server error",
  network: "a network error",
  idle_timeout: "no output for too long",
  usage_limit: "the usage limit",
  cli_crashed: "the CLI stopping",
  context_lost: "a lost conversation",
  unknown: "an error",
};

function time(iso: string): string {
  return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function seconds(value: number): string {
  if (value < 60) return `${Math.round(value * 10) / 10} s`;
  if (value < 3600) return `${Math.round(value / 60)} min`;
  return `${Math.round((value / 3600) * 10) / 10} h`;
}

/** The line a retry shows: what happened, and when the turn goes on. */
export function retryText(data: Data<"retry.scheduled">): { tone: NoticeTone; text: string } {
  const of = data.max_attempts ? ` of ${data.max_attempts}` : "";
  const attempt = `attempt ${data.attempt}${of}`;
  if (data.kind === "usage_limit" || data.resume_at) {
    const until = data.resume_at ? `until ${time(data.resume_at)}` : "for the limit to reset";
    return {
      tone: "wait",
      text: `Usage limit reached: waiting ${until}, then the turn goes on (${attempt}).`,
    };
  }
  const when = data.delay_s != null ? ` in ${seconds(data.delay_s)}` : "";
  const who = data.source === "cli" ? "The CLI retries" : "Retrying";
  const why = KIND_WORDS[data.kind] ?? data.kind.replace(/_/g, " ");
  const message = data.message ? `: ${data.message}` : "";
  return { tone: "retry", text: `${who}${when} (${attempt}) after ${why}${message}` };
}

/** "Turn interrupted" plus the reason, said once. */
export function interruptedText(reason: string | null): string {
  if (!reason || reason === "interrupted" || reason === "client") return "Turn interrupted";
  const sentence = /^the turn was interrupted\s*(.*?)\.?$/i.exec(reason.trim());
  if (sentence) return sentence[1] ? `Turn interrupted ${sentence[1]}` : "Turn interrupted";
  const words: Record<string, string> = {
    replica_lost: "(the gateway replica running it stopped)",
    shutdown: "(the gateway stopped)",
    closed: "(the session was closed)",
  };
  return `Turn interrupted ${words[reason] ?? `(${reason.replace(/_/g, " ")})`}`;
}

export class TranscriptBuilder {
  readonly t: Transcript = emptyTranscript();

  /** Applies one event; false when it was already applied (a replay). */
  apply(event: GatewayEvent): boolean {
    const t = this.t;
    if (event.seq <= t.lastSeq) return false;
    t.lastSeq = event.seq;
    t.version++;
    this.fold(event);
    return true;
  }

  private turn(event: GatewayEvent): Turn | null {
    if (!event.turn_id) return null;
    let turn = this.t.turnIndex.get(event.turn_id);
    if (!turn) {
      turn = { id: event.turn_id, number: this.t.turns.length + 1, items: [], status: "running", v: 0 };
      this.t.turns.push(turn);
      this.t.turnIndex.set(event.turn_id, turn);
    }
    turn.v++;
    return turn;
  }

  private place(event: GatewayEvent, item: Item): Item {
    const turn = this.turn(event);
    (turn ? turn.items : this.t.head).push(item);
    return item;
  }

  private hidden(event: GatewayEvent): void {
    this.place(event, { kind: "hidden", key: `h${event.seq}`, seq: event.seq, type: event.type, v: 0 });
  }

  private notice(event: GatewayEvent, tone: NoticeTone, text: string, link: string | null = null): NoticeItem {
    const item: NoticeItem = { kind: "notice", key: `n${event.seq}`, seq: event.seq, tone, text, link, v: 0 };
    this.place(event, item);
    return item;
  }

  private text(event: GatewayEvent, messageId: string, reasoning: boolean): TextItem {
    const key = `${reasoning ? "r" : "m"}:${event.turn_id ?? ""}:${messageId}`;
    let item = this.t.texts.get(key);
    if (!item) {
      item = { kind: "text", key, reasoning, text: "", seqs: [], completed: false, v: 0 };
      this.t.texts.set(key, item);
      this.place(event, item);
    } else {
      this.turn(event);
    }
    item.seqs.push(event.seq);
    item.v++;
    return item;
  }

  /** The tool card of `toolId` (made on first sight); `mark`: the event's seq is the card's. */
  private tool(
    event: GatewayEvent,
    toolId: string,
    name = "",
    input: Record<string, unknown> = {},
    mark = true,
  ): ToolItem {
    let item = this.t.tools.get(toolId);
    if (!item) {
      item = {
        kind: "tool",
        key: `t:${toolId}`,
        toolId,
        name,
        toolKind: "other",
        input,
        seqs: [],
        output: "",
        status: null,
        exitCode: null,
        approvals: [],
        question: null,
        v: 0,
      };
      this.t.tools.set(toolId, item);
      this.place(event, item);
    } else {
      this.turn(event);
    }
    if (mark) item.seqs.push(event.seq);
    item.v++;
    return item;
  }

  private settle(): void {
    this.t.pending = this.t.pending.filter(
      (entry) => (entry.approval && !entry.approval.resolved) || (entry.question && !entry.question.resolved),
    );
  }

  private fold(event: GatewayEvent): void {
    const t = this.t;
    switch (event.type) {
      case "session.created":
      case "session.thread_bound":
      case "message.completed":
        if (event.type === "message.completed") {
          const item = this.text(event, event.data.message_id, false);
          item.text = event.data.text || item.text;
          item.completed = true;
          return;
        }
        return this.hidden(event);
      case "session.provider_selected": {
        const { provider, reason, skipped } = event.data;
        if (reason === "explicit" || reason === "default" || skipped.length === 0) return this.hidden(event);
        const why = skipped.map((s) => `${s.provider} ${s.reason}`).join("; ");
        this.notice(event, "selected", `Working with ${provider}: ${why}.`);
        return;
      }
      case "session.forked": {
        const d = event.data;
        const how = d.conversation === "native" ? "the agent's own fork" : "a hand-off of the conversation";
        if (d.child_id === event.session_id) {
          t.forkedFrom = { parent: d.parent_id, turnNumber: d.turn_number };
          this.notice(event, "forked", `Forked from ${d.parent_id} at turn ${d.turn_number} (${how}).`, d.parent_id);
        } else {
          this.notice(event, "forked", `Forked at turn ${d.turn_number} into ${d.child_id} (${how}).`, d.child_id);
        }
        return;
      }
      case "session.closed":
        this.notice(event, "closed", "Session closed.");
        return;
      case "session.reverted": {
        const d = event.data;
        this.notice(
          event,
          "reverted",
          `Workspace reverted to the start of turn ${d.turn_number} by ${d.by}: ${d.files.length} file(s) put back.`,
        );
        return;
      }
      case "session.configured": {
        const d = event.data;
        const model = d.model ? `model ${d.model}` : "the agent's own model";
        this.notice(event, "configured", `Set by ${d.by}: ${d.provider}, ${model}, approvals ${d.approval_mode}.`);
        return;
      }
      case "budget.reached": {
        const d = event.data;
        const whose =
          { session: "The session's budget", key_daily: `Key ${d.key}'s budget for today`, key_monthly: `Key ${d.key}'s budget for this month` }[d.budget] ??
          "A budget";
        const amount = d.measure === "cost_usd" ? `$${d.limit}` : `${d.limit} tokens`;
        this.notice(event, "warning", `${whose} of ${amount} is spent (${d.used} used).`);
        return;
      }
      case "turn.started":
        t.firstPrompt ??= event.data.prompt;
        this.place(event, { kind: "prompt", key: `p${event.seq}`, seq: event.seq, text: event.data.prompt, v: 0 });
        return;
      case "message.delta": {
        const item = this.text(event, event.data.message_id, false);
        if (!item.completed) item.text += event.data.text;
        return;
      }
      case "reasoning.delta": {
        const item = this.text(event, event.data.message_id, true);
        if (!item.completed) item.text += event.data.text;
        return;
      }
      case "reasoning.completed": {
        const item = this.text(event, event.data.message_id, true);
        item.text = event.data.text || item.text;
        item.completed = true;
        return;
      }
      case "tool.started": {
        const d = event.data;
        const item = this.tool(event, d.tool_id, d.name, d.input);
        item.name = d.name;
        item.toolKind = d.kind;
        item.input = d.input;
        return;
      }
      case "tool.output": {
        const item = this.tool(event, event.data.tool_id);
        item.output += event.data.text;
        return;
      }
      case "tool.completed": {
        const d = event.data;
        const item = this.tool(event, d.tool_id);
        item.status = d.status;
        item.exitCode = d.exit_code ?? null;
        if (d.output && !item.output) item.output = d.output;
        return;
      }
      case "plan.updated":
        t.plan = event.data.entries;
        this.notice(event, "plan", "Plan updated").entries = event.data.entries;
        return;
      case "approval.requested": {
        const d = event.data;
        const tool = this.tool(event, d.tool_id ?? `approval:${d.approval_id}`, d.tool, d.input, false);
        if (!tool.name) tool.name = d.tool;
        if (Object.keys(tool.input).length === 0) tool.input = d.input;
        if (tool.toolKind === "other" && tool.seqs.length === 0) tool.toolKind = guessKind(d.tool, d.input);
        const approval: ApprovalItem = {
          id: d.approval_id,
          seq: event.seq,
          tool: d.tool,
          title: d.title ?? null,
          input: d.input,
          options: d.options,
          expiresAt: d.expires_at,
          resolved: null,
          resolvedSeq: null,
        };
        tool.approvals.push(approval);
        t.approvals.set(d.approval_id, { approval, tool });
        t.pending.push({ approval, tool });
        return;
      }
      case "approval.resolved": {
        const found = t.approvals.get(event.data.approval_id);
        if (!found) return this.hidden(event);
        this.tool(event, found.tool.toolId, "", {}, false); // the seq lives on the approval
        found.approval.resolved = event.data;
        found.approval.resolvedSeq = event.seq;
        this.settle();
        return;
      }
      case "question.asked": {
        const d = event.data;
        const tool = this.tool(event, d.tool_id ?? `question:${d.question_id}`, "AskUserQuestion", {}, false);
        const question: QuestionItem = {
          id: d.question_id,
          seq: event.seq,
          questions: d.questions,
          resolved: null,
          resolvedSeq: null,
        };
        tool.question = question;
        t.questions.set(d.question_id, { question, tool });
        t.pending.push({ question, tool });
        return;
      }
      case "question.resolved": {
        const found = t.questions.get(event.data.question_id);
        if (!found) return this.hidden(event);
        this.tool(event, found.tool.toolId, "", {}, false);
        found.question.resolved = event.data;
        found.question.resolvedSeq = event.seq;
        this.settle();
        return;
      }
      case "retry.scheduled": {
        const { tone, text } = retryText(event.data);
        this.notice(event, tone, text);
        return;
      }
      case "provider.switched": {
        const d = event.data;
        const handoff = d.handoff?.turns ? `; ${d.handoff.turns} earlier turn(s) handed over` : "";
        this.notice(event, "switched", `${d.from_provider} could not go on (${d.reason}): ${d.to_provider} takes over${handoff}.`);
        return;
      }
      case "usage":
        addUsage(t.usage, event.data.usage);
        return this.hidden(event);
      case "warning": {
        const code = event.data.code ? ` (${event.data.code})` : "";
        this.notice(event, "warning", `Warning${code}: ${event.data.message}`);
        return;
      }
      case "turn.completed":
      case "turn.failed":
      case "turn.interrupted": {
        const turn = this.turn(event);
        const status =
          event.type === "turn.completed" ? "completed" : event.type === "turn.failed" ? "failed" : "interrupted";
        if (turn) turn.status = status;
        const end: EndItem = {
          kind: "end",
          key: `e${event.seq}`,
          seq: event.seq,
          status,
          turnId: event.turn_id ?? "",
          usage: event.type === "turn.completed" ? toUsage(event.data.usage) : null,
          changes: event.type === "turn.completed" ? (event.data.changes ?? null) : null,
          error: event.type === "turn.failed" ? event.data.error : null,
          reason: event.type === "turn.interrupted" ? event.data.reason : null,
          v: 0,
        };
        if (event.type === "turn.completed" && turn && event.data.final_text) {
          const shown = turn.items.some((item) => item.kind === "text" && !item.reasoning && item.text);
          if (!shown) {
            const key = `m:${turn.id}:final`;
            const text: TextItem = { kind: "text", key, reasoning: false, text: event.data.final_text, seqs: [], completed: true, v: 1 };
            turn.items.push(text);
          }
        }
        // Approvals and questions left open by the end of the turn are answered no more.
        this.place(event, end);
        return;
      }
      default:
        return this.hidden(event);
    }
  }
}

function guessKind(tool: string, input: Record<string, unknown>): string {
  if (/^(bash|shell|command|exec)/i.test(tool) || "command" in input) return "command";
  if (/edit|write|patch|create|replace/i.test(tool)) return "file_change";
  return "other";
}
