/** A real HTTP server on loopback that plays the gateway's part, one scripted handler per test. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

export type Handler = (request: Seen, response: ServerResponse) => void | Promise<void>;

export interface TestServer {
  baseUrl: string;
  seen: Seen[];
  close(): Promise<void>;
}

export async function serve(handler: Handler): Promise<TestServer> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const entry: Seen = {
        method: request.method ?? "",
        url: request.url ?? "",
        headers: request.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      seen.push(entry);
      Promise.resolve(handler(entry, response)).catch((error: unknown) => {
        response.statusCode = 500;
        response.end(String(error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function json(response: ServerResponse, status: number, body: unknown, headers = {}): void {
  const type = status >= 400 ? "application/problem+json" : "application/json";
  response.writeHead(status, { "Content-Type": type, ...headers });
  response.end(JSON.stringify(body));
}

/** An event envelope as the gateway sends it. */
export function envelope(seq: number, text = `part ${seq}`): Record<string, unknown> {
  return {
    seq,
    session_id: "ses_1",
    turn_id: "trn_1",
    attempt: 1,
    provider: "claude_code",
    at: "2026-01-01T00:00:00Z",
    type: "message.delta",
    data: { message_id: "msg_1", text },
  };
}

/** The gateway's SSE framing of one event. */
export function sseEvent(seq: number): string {
  return `data: ${JSON.stringify(envelope(seq))}\nid: ${seq}\n\n`;
}

export function openStream(response: ServerResponse): void {
  response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  response.write(": connected\nretry: 2000\n\n");
}
