/**
 * A Server-Sent Events parser (the WHATWG event-stream format) over a byte stream, as `fetch`
 * gives it: browsers and Node alike, so the request can carry an `Authorization` header.
 */

/** One dispatched SSE message. `id` is the last `id:` seen (it persists across messages). */
export interface SseMessage {
  event: string;
  data: string;
  id: string;
  /** The `retry:` field of this message, when it had one (milliseconds). */
  retry: number | null;
}

/** The messages of an event stream, in order; comments and keep-alives are skipped. */
export async function* parseSse(
  body: ReadableStream<Uint8Array>,
  lastId = "",
): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let retry: number | null = null;
  let id = lastId;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return; // an unterminated last message is dropped, as the spec says
      buffer += decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const match = /\r\n|\r|\n/g;
        match.lastIndex = start;
        const found = match.exec(buffer);
        // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
        if (!found || (found[0] === "\r" && found.index === buffer.length - 1)) break;
        const line = buffer.slice(start, found.index);
        start = found.index + found[0].length;
        if (line === "") {
          if (data.length > 0) {
            yield { event: event || "message", data: data.join("\n"), id, retry };
          }
          event = "";
          data = [];
          retry = null;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
        else if (field === "id" && !value.includes("\0")) id = value;
        else if (field === "retry" && /^[0-9]+$/.test(value)) retry = Number(value);
      }
      buffer = buffer.slice(start);
    }
  } finally {
    // Ends the request too when the consumer stops early (a `break` out of the loop).
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
