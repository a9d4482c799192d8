import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";

import { GatewayClient, GatewayError } from "../src/index.js";
import { json, serve } from "./server.js";

const session = {
  id: "ses_1",
  provider: "claude_code",
  status: "idle",
  workspace: "/w",
  approval_mode: "ask",
  created_at: "2026-01-02T00:00:00Z",
  updated_at: "2026-01-02T00:00:00Z",
  last_seq: 2,
};

test("calls carry the key and JSON, and answers come back typed", async (t) => {
  const server = await serve((request, response) => {
    if (request.method === "POST" && request.url === "/v1/sessions") json(response, 201, session);
    else if (request.url === "/v1/sessions/ses_1/turns") json(response, 202, { id: "trn_1" });
    else if (request.url === "/v1/sessions/ses_1/approvals/apr%2F1")
      json(response, 200, { id: "apr/1", status: "allowed" });
    else json(response, 404, { type: "about:blank#not_found", status: 404, detail: "no such" });
  });
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl + "/", token: "k1" });

  const created = await gateway.createSession({ workspace: "/w", metadata: { title: "T" } });
  assert.equal(created.id, "ses_1");
  const turn = await gateway.startTurn("ses_1", "hello");
  assert.equal(turn.id, "trn_1");
  await gateway.respondToApproval("ses_1", "apr/1", { decision: "allow" });

  const [create, start, approve] = server.seen;
  assert.equal(create?.headers.authorization, "Bearer k1");
  assert.equal(create?.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(create?.body ?? ""), { workspace: "/w", metadata: { title: "T" } });
  assert.deepEqual(JSON.parse(start?.body ?? ""), { prompt: "hello" });
  assert.deepEqual(JSON.parse(approve?.body ?? ""), { decision: "allow" });
});

test("a problem answer is a GatewayError with its status, kind and detail", async (t) => {
  const server = await serve((_request, response) =>
    json(
      response,
      429,
      { type: "https://gateway/problems/too_many_sessions", status: 429, detail: "too many" },
      { "Retry-After": "7" },
    ),
  );
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl, token: "k" });
  const error = await gateway.getSession("ses_x").catch((caught: unknown) => caught);
  assert.ok(error instanceof GatewayError);
  assert.equal(error.status, 429);
  assert.equal(error.kind, "too_many_sessions");
  assert.equal(error.message, "too many");
  assert.equal(error.retryAfterS, 7);
});

test("sessions() walks the pages with before = the last created_at", async (t) => {
  const pages = [
    [
      { ...session, id: "ses_3", created_at: "2026-01-03T00:00:00Z" },
      { ...session, id: "ses_2", created_at: "2026-01-02T00:00:00Z" },
    ],
    [{ ...session, id: "ses_1", created_at: "2026-01-01T00:00:00Z" }],
    [],
  ];
  const server = await serve((_request, response) =>
    json(response, 200, { sessions: pages.shift() ?? [] }),
  );
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl, token: "k" });
  const ids: string[] = [];
  for await (const found of gateway.sessions({ status: "idle", limit: 2 })) ids.push(found.id);
  assert.deepEqual(ids, ["ses_3", "ses_2", "ses_1"]);
  assert.deepEqual(
    server.seen.map((request) => request.url),
    [
      "/v1/sessions?status=idle&limit=2",
      "/v1/sessions?status=idle&limit=2&before=2026-01-02T00%3A00%3A00Z",
      "/v1/sessions?status=idle&limit=2&before=2026-01-01T00%3A00%3A00Z",
    ],
  );
});

test("changes, usage and the query parameters a call takes", async (t) => {
  const server = await serve((request, response) => json(response, 200, { url: request.url }));
  t.after(() => server.close());
  const gateway = new GatewayClient({ baseUrl: server.baseUrl, token: "k" });
  await gateway.getChanges("ses_1", { from: "trn_1", to: "trn_1" });
  await gateway.usage({ from: "2026-01-01T00:00:00Z" });
  await gateway.listProviders({ fresh: true }).catch(() => undefined);
  assert.deepEqual(
    server.seen.map((request) => request.url),
    [
      "/v1/sessions/ses_1/changes?from=trn_1&to=trn_1&format=json",
      "/v1/usage?from=2026-01-01T00%3A00%3A00Z",
      "/v1/providers?fresh=true",
    ],
  );
});

interface Generator {
  generatedTypes(): Promise<string>;
  apiVersion(): Promise<string>;
  TYPES: URL;
  PACKAGE: URL;
}

test("the generated types and the package version follow docs/openapi.json", async () => {
  // The test runs from build-test/test/: the generator stays in scripts/ of the package.
  const generator = new URL("../../scripts/generate.mjs", import.meta.url).href;
  const { apiVersion, generatedTypes, PACKAGE, TYPES } = (await import(generator)) as Generator;
  // Stale types fail here: run `npm run generate` in clients/typescript and commit the result.
  assert.equal(await readFile(TYPES, "utf8"), await generatedTypes(), "src/openapi.ts is stale");
  const pkg = JSON.parse(await readFile(PACKAGE, "utf8")) as { version: string };
  assert.equal(pkg.version, await apiVersion());
});
