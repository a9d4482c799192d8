/**
 * Agent Gateway's TypeScript client: typed calls for the REST API (types generated from the
 * gateway's OpenAPI document) and the event stream as a reconnecting async iterator.
 *
 * ```ts
 * const gateway = new GatewayClient({ baseUrl: "http://127.0.0.1:8765", token });
 * const session = await gateway.createSession({ workspace: "/home/me/project" });
 * await gateway.startTurn(session.id, "Summarise the README");
 * for await (const event of gateway.events(session.id)) {
 *   if (event.type === "message.delta") process.stdout.write(event.data.text);
 *   if (event.type === "turn.completed") break;
 * }
 * ```
 */
export { GatewayClient, type ClientOptions } from "./client.js";
export { GatewayError, type Problem } from "./errors.js";
export { parseSse, type SseMessage } from "./sse.js";
export { streamEvents, type StreamItem, type StreamOptions } from "./stream.js";
export type * from "./types.js";
export type { components, operations, paths } from "./openapi.js";
