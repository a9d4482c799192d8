import assert from "node:assert/strict";
import { test } from "node:test";

import { GatewayClient, GatewayError, parseSse, type StreamItem } from "../src/index.js";
import { envelope, json, openStream, serve, sseEvent } from "./server.js";

const FAST = { minRetryMs: 5, maxRetryMs: 20 };

function seqs(items: StreamItem[]): number[] {
  return items.flatMap((item) => (item.kind === "event" ? [item.event.seq] : []));
}

async function collect(iterator: AsyncIterable<StreamItem>, limit = 100): Promise<StreamItem[]> {
  const items: StreamItem[] = [];
  for await (const item of iterator) {
    items.push(item);
    if (items.length >= limit) break;
  }
  return items;
}

test("a cut stream reconnects with Last-Event-ID and yields every event once", async (t) => {
  let connection = 0;
  const server = await serve((_request, response) => {
    connection += 1;
    if (connection === 1) {
      openStream(response);
      response.write(sseEvent(1) + sseEvent(2) + sseEvent(3));
      // Half of event 4, then the connection drops.
      response.write(sseEvent(4).slice(0, 20));
      setTimeout(() => response.destroy(), 20);
    } else if (connection === 2) {
      openStream(response);
      // A replay from before the cursor: the client must drop 2 and 3.
      response.end(sseEvent(2) + sseEvent(3) + sseEvent(4) + sseEvent(5));
    } else {
      response.writeHead(204).end(); // closed and read to its end
    }
  });
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl, token: "k" });

  const items = await collect(gateway.stream("ses_1", FAST));

  assert.deepEqual(seqs(items), [1, 2, 3, 4, 5]);
  assert.deepEqual(
    server.seen.map((request) => [request.headers["last-event-id"], request.headers.accept]),
    [
      [undefined, "text/event-stream"],
      ["3", "text/event-stream"],
      ["5", "text/event-stream"],
    ],
  );
  assert.ok(server.seen.every((request) => request.headers.authorization === "Bearer k"));
  assert.equal(items.filter((item) => item.kind === "connected").length, 2);
});

test("control frames: resync moves the cursor, shutdown waits retry_ms, evicted reconnects", async (t) => {
  let connection = 0;
  const opened: number[] = [];
  const server = await serve((_request, response) => {
    connection += 1;
    opened.push(Date.now());
    if (connection <= 3) openStream(response);
    if (connection === 1) {
      const resync = JSON.stringify({ type: "resync_required", first_seq: 10, after: 0 });
      const degraded = JSON.stringify({ type: "degraded", reason: "redis", poll_ms: 500 });
      const shutdown = JSON.stringify({
        type: "shutdown",
        reason: "gateway_shutdown",
        retry_ms: 150,
      });
      response.end(
        `event: resync_required\ndata: ${resync}\nid: 9\n\n` +
          sseEvent(10) +
          `event: degraded\ndata: ${degraded}\n\n` +
          `event: recovered\ndata: {"type":"recovered"}\n\n` +
          sseEvent(11) +
          `event: shutdown\ndata: ${shutdown}\nretry: 150\n\n`,
      );
    } else if (connection === 2) {
      const evicted = JSON.stringify({ type: "evicted", last_seq_sent: 12, reason: "lagging" });
      response.write(sseEvent(12) + `event: evicted\ndata: ${evicted}\n\n`);
      // The server keeps this one open: the client must leave by itself.
    } else if (connection === 3) {
      response.end(sseEvent(13));
    } else {
      response.writeHead(204).end();
    }
  });
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl, token: "k" });

  const items = await collect(gateway.stream("ses_1", { ...FAST, after: 0 }));

  assert.deepEqual(seqs(items), [10, 11, 12, 13]);
  const frames = items.flatMap((item) => (item.kind === "control" ? [item.frame.type] : []));
  assert.deepEqual(frames, ["resync_required", "degraded", "recovered", "shutdown", "evicted"]);
  assert.deepEqual(
    server.seen.map((request) => request.headers["last-event-id"]),
    [undefined, "11", "12", "13"],
  );
  const [first = 0, second = 0] = opened;
  assert.ok(second - first >= 140, `reconnected ${second - first} ms after shutdown`);
});

test("a busy gateway (503 + Retry-After) is asked again; a refused key ends the stream", async (t) => {
  let connection = 0;
  const server = await serve((request, response) => {
    connection += 1;
    if (request.headers.authorization !== "Bearer good") {
      json(response, 401, { type: "about:blank#unauthorized", status: 401, detail: "bad key" });
    } else if (connection === 1) {
      json(response, 503, { status: 503, detail: "too many streams" }, { "Retry-After": "0" });
    } else if (connection === 2) {
      openStream(response);
      response.end(sseEvent(1));
    } else {
      response.writeHead(204).end();
    }
  });
  t.after(() => server.close());

  const good = new GatewayClient({ baseUrl: server.baseUrl, token: "good" });
  const items = await collect(good.stream("ses_1", FAST));
  assert.deepEqual(seqs(items), [1]);
  const disconnected = items.find((item) => item.kind === "disconnected");
  assert.ok(disconnected?.kind === "disconnected" && disconnected.error instanceof GatewayError);

  const bad = new GatewayClient({ baseUrl: server.baseUrl, token: "bad" });
  await assert.rejects(collect(bad.stream("ses_1", FAST)), (error: unknown) => {
    return error instanceof GatewayError && error.status === 401 && error.message === "bad key";
  });
});

test("a gateway that is down is retried until it answers", async (t) => {
  // A port with nothing listening: the connection is refused, then the server comes up.
  const closedPort = await serve(() => undefined);
  const url = closedPort.baseUrl;
  await closedPort.close();
  const gateway = new GatewayClient({ baseUrl: url, token: "k" });
  const controller = new AbortController();
  const items: StreamItem[] = [];
  for await (const item of gateway.stream("ses_1", { ...FAST, signal: controller.signal })) {
    items.push(item);
    if (items.length === 3) controller.abort();
  }
  assert.ok(items.every((item) => item.kind === "disconnected"));
  t.diagnostic(`gave up after ${items.length} refused connections, as asked`);
});

test("abort ends the iterator quietly while it waits for the next event", async (t) => {
  const server = await serve((_request, response) => {
    openStream(response);
    response.write(sseEvent(1)); // and then nothing: a live stream with no more events
  });
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl, token: "k" });
  const controller = new AbortController();
  const events: number[] = [];
  for await (const event of gateway.events("ses_1", { signal: controller.signal })) {
    events.push(event.seq);
    controller.abort();
  }
  assert.deepEqual(events, [1]);
});

function bytes(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

test("the SSE parser: CRLF split across chunks, multi-line data, comments, named events", async () => {
  const stream = bytes(
    ": hello\r",
    "\n",
    "data: a\r\ndata: b\r",
    "\nid: 7\r\n\r\n",
    "event: shutdown\ndata:{}\nretry: 50\n\n",
    "data: no blank line at the end",
  );
  const messages = [];
  for await (const message of parseSse(stream)) messages.push(message);
  assert.deepEqual(messages, [
    { event: "message", data: "a\nb", id: "7", retry: null },
    { event: "shutdown", data: "{}", id: "7", retry: 50 },
  ]);
  assert.equal(envelope(1).type, "message.delta");
});
