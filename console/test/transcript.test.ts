import assert from "node:assert/strict";
import { test } from "node:test";

import type { GatewayEvent } from "@agent-gateway/client";

import { interruptedText, retryText, TranscriptBuilder, type Transcript } from "../src/transcript";

let seq = 0;
function event(type: string, data: Record<string, unknown>, turn: string | null = "trn_1"): GatewayEvent {
  seq += 1;
  return { seq, session_id: "ses_1", turn_id: turn, attempt: 1, provider: "claude_code", at: "2026-01-01T00:00:00Z", type, data } as GatewayEvent;
}

/** Every seq the model holds, where the view gives it an element. */
function seqs(t: Transcript): number[] {
  const found: number[] = [];
  for (const item of [...t.head, ...t.turns.flatMap((turn) => turn.items)]) {
    switch (item.kind) {
      case "text":
        found.push(...item.seqs);
        break;
      case "tool":
        found.push(...item.seqs);
        for (const a of item.approvals) found.push(a.seq, ...(a.resolvedSeq ? [a.resolvedSeq] : []));
        if (item.question) found.push(item.question.seq, ...(item.question.resolvedSeq ? [item.question.resolvedSeq] : []));
        break;
      default:
        found.push(item.seq);
    }
  }
  return found.sort((a, b) => a - b);
}

test("a turn with text, a tool, its approval and the end: each event in one place, once", () => {
  seq = 0;
  const builder = new TranscriptBuilder();
  const events = [
    event("session.created", { provider: "claude_code", workspace: "/w", approval_mode: "ask" }, null),
    event("session.provider_selected", { provider: "claude_code", reason: "explicit", skipped: [], scores: [], strategy: "ordered" }, null),
    event("turn.started", { prompt: "fix it" }),
    event("session.thread_bound", { thread_id: "t" }, null),
    event("message.delta", { message_id: "m1", text: "I will " }),
    event("message.delta", { message_id: "m1", text: "edit." }),
    event("message.completed", { message_id: "m1", text: "I will edit." }),
    event("tool.started", { tool_id: "tu1", name: "Edit", kind: "file_change", input: { file_path: "/w/a", old_string: "a", new_string: "b" } }),
    event("approval.requested", { approval_id: "ap1", tool: "Edit", tool_id: "tu1", input: {}, options: [], expires_at: "2026-01-01T00:05:00Z" }),
    event("approval.resolved", { approval_id: "ap1", decision: "allow", by: "client", reason: "decided" }),
    event("tool.completed", { tool_id: "tu1", status: "completed", output: "ok", exit_code: null }),
    event("usage", { usage: { input_tokens: 10, output_tokens: 5, cached_input_tokens: 0, cache_creation_input_tokens: 0, cost_usd: 0.01 } }),
    event("turn.completed", { final_text: "I will edit.", usage: null, changes: { files: 1, additions: 1, deletions: 1 } }),
  ];
  for (const e of events) assert.equal(builder.apply(e), true);
  assert.equal(builder.apply(events[5] as GatewayEvent), false); // a replay changes nothing
  const t = builder.t;
  assert.deepEqual(seqs(t), events.map((e) => e.seq));
  const [turn] = t.turns;
  assert.deepEqual(turn?.items.map((item) => item.kind), ["prompt", "text", "tool", "hidden", "end"]);
  const text = turn?.items[1];
  assert.ok(text?.kind === "text");
  assert.equal(text.text, "I will edit.");
  const tool = turn?.items[2];
  assert.ok(tool?.kind === "tool");
  assert.equal(tool.approvals[0]?.resolved?.decision, "allow");
  assert.equal(tool.status, "completed");
  assert.equal(t.pending.length, 0);
  assert.deepEqual(t.usage, { input: 10, output: 5, cached: 0, cost: 0.01 });
  assert.equal(t.firstPrompt, "fix it");
  // Internal events are hidden marks, not lines.
  assert.deepEqual(t.head.map((item) => item.kind), ["hidden", "hidden", "hidden"]);
});

test("a plan tool and a question: the plan panel and the question card, no raw JSON", () => {
  seq = 0;
  const builder = new TranscriptBuilder();
  builder.apply(event("turn.started", { prompt: "plan" }));
  builder.apply(event("tool.started", { tool_id: "tu1", name: "TodoWrite", kind: "other", input: { todos: [] } }));
  builder.apply(event("plan.updated", { entries: [{ text: "Read", status: "in_progress" }] }));
  builder.apply(event("tool.started", { tool_id: "tu2", name: "AskUserQuestion", kind: "other", input: { questions: [] } }));
  builder.apply(event("question.asked", { question_id: "q1", tool_id: "tu2", questions: [{ prompt: "Which?", options: [], multi_select: false, free_text: true }], expires_at: "x" }));
  assert.equal(builder.t.pending.length, 1);
  builder.apply(event("question.resolved", { question_id: "q1", by: "client", reason: "answered", answers: [{ selected: [], text: "this" }], answered_by: "admin" }));
  assert.equal(builder.t.pending.length, 0);
  assert.deepEqual(builder.t.plan, [{ text: "Read", status: "in_progress" }]);
  assert.deepEqual(seqs(builder.t), [1, 2, 3, 4, 5, 6]);
});

test("waits and interruptions read as one plain line", () => {
  assert.deepEqual(
    retryText({ source: "gateway", attempt: 2, max_attempts: 4, kind: "server_error", delay_s: 10, message: null, resume_at: null }),
    { tone: "retry", text: "Retrying in 10 s (attempt 2 of 4) after a server error" },
  );
  const limit = retryText({ source: "gateway", attempt: 1, max_attempts: null, kind: "usage_limit", delay_s: 600, message: null, resume_at: "2026-01-01T10:05:00Z" });
  assert.equal(limit.tone, "wait");
  assert.match(limit.text, /^Usage limit reached: waiting until .+, then the turn goes on \(attempt 1\)\.$/);
  assert.equal(interruptedText("The turn was interrupted (by the user)."), "Turn interrupted (by the user)");
  assert.equal(interruptedText("The turn was interrupted."), "Turn interrupted");
  assert.equal(interruptedText("client"), "Turn interrupted");
  assert.equal(interruptedText("replica_lost"), "Turn interrupted (the gateway replica running it stopped)");
});
