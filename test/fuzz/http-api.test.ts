/**
 * HTTP fuzzing of the /api endpoints that take a JSON body: thousands of generated malformed bodies
 * per endpoint (wrong types, deep nesting, huge numbers, invalid UTF-8, NUL bytes, truncated JSON,
 * giant strings near the body limit, duplicate keys, prototype-pollution keys) against a real
 * daemon. Each must get the contract's status and exactly `{"error": string}`; the daemon must keep
 * answering, load no model for any of them, and its prototypes must stay clean.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { casesFor, runCases, SENTINEL } from "./bodies.js";
import { checkAfterFuzz, FUZZ_ENV, runsPerEndpoint } from "./fuzz-daemon.js";

const ENDPOINTS = [
  "POST /api/generate",
  "POST /api/chat",
  "POST /api/embed",
  "POST /api/embeddings",
  "POST /api/show",
  "POST /api/create",
  "POST /api/copy",
  "DELETE /api/delete",
  "POST /api/pull",
  "POST /api/push",
  "POST /api/rerank",
];

t.test("malformed bodies on every /api endpoint", async (t) => {
  const daemon = await startDaemon(t, { env: FUZZ_ENV, models: [{ name: SENTINEL }] });
  const protoKeys = Object.getOwnPropertyNames(Object.prototype);
  for (const [i, endpoint] of ENDPOINTS.entries()) {
    const cases = casesFor(endpoint, runsPerEndpoint, daemon.config.maxBodyBytes, 1000 * (i + 1));
    const started = Date.now();
    const failures = await runCases(daemon.url, cases);
    t.same(failures.slice(0, 5), [], `${endpoint}: ${cases.length} cases in ${Date.now() - started} ms, ${failures.length} wrong`);
    t.equal((await fetch(`${daemon.url}/api/version`)).status, 200, `${endpoint}: the daemon still answers`);
  }
  t.same(Object.getOwnPropertyNames(Object.prototype), protoKeys, "Object.prototype untouched");
  await checkAfterFuzz(t, daemon);
  // The model itself still works after all that (one token).
  const res = await postJson(`${daemon.url}/api/generate`, { model: SENTINEL, prompt: "hi", stream: false, options: { num_predict: 1 } });
  t.equal(res.status, 200, "a real request is served");
});
