/**
 * HTTP fuzzing, second part: the /v1 (OpenAI) endpoints with the same malformed bodies as the /api
 * suite, random methods and paths (traversal, encoded NUL and CRLF), and blob uploads with odd or
 * mismatching digests. Every error is the contract's `{"error": string}`, nothing is a 5xx, no
 * blob is written for a mismatching upload, and the daemon keeps answering.
 */
import t from "tap";
import { readdirSync } from "node:fs";
import { startDaemon } from "../helpers/daemon.js";
import { blobCases, casesFor, pathCases, runCases, SENTINEL } from "./bodies.js";
import { checkAfterFuzz, FUZZ_ENV, runsPerEndpoint } from "./fuzz-daemon.js";

const ENDPOINTS = [
  "POST /v1/chat/completions",
  "POST /v1/completions",
  "POST /v1/embeddings",
  "POST /v1/responses",
  "POST /v1/messages",
  "POST /v1/messages/count_tokens",
];

t.test("malformed bodies on the /v1 endpoints, odd paths and odd digests", async (t) => {
  const daemon = await startDaemon(t, { env: FUZZ_ENV, models: [{ name: SENTINEL }] });
  const { store } = daemon.app.services;
  const blobsBefore = readdirSync(store.blobsDir).sort();
  const protoKeys = Object.getOwnPropertyNames(Object.prototype);
  const suites: Array<[string, ReturnType<typeof casesFor>]> = [
    ...ENDPOINTS.map((e, i): [string, ReturnType<typeof casesFor>] => [e, casesFor(e, runsPerEndpoint, daemon.config.maxBodyBytes, 7000 + 100 * i)]),
    ["random methods and paths", pathCases(runsPerEndpoint * 2, 77)],
    ["blob digests", blobCases(runsPerEndpoint, 78)],
  ];
  for (const [name, cases] of suites) {
    const started = Date.now();
    const failures = await runCases(daemon.url, cases);
    t.same(failures.slice(0, 5), [], `${name}: ${cases.length} cases in ${Date.now() - started} ms, ${failures.length} wrong`);
    t.equal((await fetch(`${daemon.url}/api/version`)).status, 200, `${name}: the daemon still answers`);
  }
  t.same(Object.getOwnPropertyNames(Object.prototype), protoKeys, "Object.prototype untouched");
  t.same(readdirSync(store.blobsDir).sort(), blobsBefore, "no blob or temporary file was left by any upload");
  await checkAfterFuzz(t, daemon);
});
