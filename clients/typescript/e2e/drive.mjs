// Drives one session through a real gateway with the built SDK (dist/), for
// tests/e2e/test_typescript_sdk_e2e.py: a tool call allowed, a slow turn interrupted, a turn
// cut by a gateway restart (the test restarts it when this prints {"step": "restart"}), and a
// turn after it — all read from ONE event stream, which must reconnect by itself and yield
// each event once. Prints one JSON object per line; the last is {"step": "done", ...}. After
// {"step": "restart"} it reads no further until the test writes "stopped" on its stdin.
//
//   node e2e/drive.mjs <base url> <token> <workspace>
import { createInterface } from "node:readline";

import { GatewayClient } from "../dist/index.js";

const [baseUrl, token, workspace] = process.argv.slice(2);
const gateway = new GatewayClient({ baseUrl, token });
const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const ENDS = new Set(["turn.completed", "turn.failed", "turn.interrupted"]);
const told = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** A call retried while the gateway cannot be reached (it restarts during the run). */
async function retrying(call) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof TypeError) || attempt >= 60) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

const session = await gateway.createSession({ workspace, metadata: { title: "sdk e2e" } });
say({ step: "created", session_id: session.id });

const plan = [
  { prompt: "[[tool:bash echo sdk-e2e > sdk.txt && cat sdk.txt]]" },
  { prompt: "[[slow:30]]", interruptAfterDeltas: 3 },
  { prompt: "[[slow:4]]", restartAfterDeltas: 2 },
  { prompt: "say hello again" },
];
const seqs = [];
const ends = [];
let disconnects = 0;
let connects = 0;
const frames = [];
let step = 0;
let deltas = 0;
const stream = gateway.stream(session.id, { minRetryMs: 200, maxRetryMs: 1000 });
const deadline = setTimeout(() => {
  say({ step: "timeout", seqs, ends, disconnects });
  process.exit(2);
}, 150_000);

await gateway.startTurn(session.id, plan[0].prompt);
for await (const item of stream) {
  if (item.kind === "disconnected") disconnects += 1;
  if (item.kind === "control") frames.push(item.frame.type);
  if (item.kind === "connected") connects += 1;
  if (item.kind !== "event") continue;
  const event = item.event;
  seqs.push(event.seq);
  const current = plan[step];
  if (event.type === "approval.requested") {
    await retrying(() => gateway.respondToApproval(session.id, event.data.approval_id, { decision: "allow" }));
  }
  if (event.type === "message.delta") {
    deltas += 1;
    if (deltas === current.interruptAfterDeltas) await retrying(() => gateway.interrupt(session.id));
    if (deltas === current.restartAfterDeltas) {
      // Stop reading until the gateway is down: the stream must notice and reconnect.
      say({ step: "restart" });
      const answer = await told.next();
      if (answer.value !== "stopped") throw new Error(`expected "stopped", got ${answer.value}`);
    }
  }
  if (ENDS.has(event.type)) {
    const turn = await retrying(() => gateway.getTurn(session.id, event.turn_id));
    ends.push({ type: event.type, status: turn.status, final_text: turn.final_text, error: turn.error });
    step += 1;
    deltas = 0;
    if (step === plan.length) break;
    await retrying(() => gateway.startTurn(session.id, plan[step].prompt));
  }
}
clearTimeout(deadline);
process.stdin.destroy();
say({ step: "done", session_id: session.id, seqs, ends, disconnects, connects, frames });
