/**
 * docs/api.md's reranker recipe, run as a newcomer would from a clone: make-model finds llama.cpp's
 * BERT vocabulary by itself (in node-llama-cpp's bundled source), `lmd create` puts the model in the
 * store, and the curl request ranks the documents. The commands are the docs' own ```sh block.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { forkDaemon, MAIN } from "../helpers/process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const DEFAULT = "http://127.0.0.1:11434";

/** The ```sh block of docs/api.md that makes a reranker. */
function recipe(): string {
  const text = readFileSync(path.join(root, "docs", "api.md"), "utf8");
  const blocks = [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
  const found = blocks.filter((b) => b.includes("--arch bert"));
  if (found.length !== 1) throw new Error(`expected one reranker recipe in docs/api.md, found ${found.length}`);
  return found[0]!;
}

t.test("the reranker recipe of docs/api.md runs as written", async (t) => {
  const script = recipe();
  t.match(script, /^scripts\/make-model .*--vocab-file bert-bge$/m, "make-model is given a family, not a file the reader lacks");
  t.match(script, /^lmd create bge-reranker -f /m, "the model is created in the store");
  const dir = t.testdir();
  const daemon = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: path.join(dir, "models") });
  const work = path.join(dir, "work");
  mkdirSync(work);
  // The commands as written; only the paths of this checkout's tools and the daemon's address differ.
  const prelude = [
    "set -e",
    `lmd() { "${process.execPath}" "${MAIN}" "$@"; }`,
    'curl() { command curl -sS --fail-with-body --max-time 120 "$@"; }',
  ].join("\n");
  const body = script.replaceAll(DEFAULT, daemon.url).replace(/^scripts\/make-model /gm, `"${path.join(root, "scripts", "make-model")}" `);
  const out = execFileSync("bash", ["-c", `${prelude}\n${body}`], {
    cwd: work,
    encoding: "utf8",
    timeout: 300_000,
    // The bundle's clone is kept between runs in the temp directory, not in the user's ~/.cache.
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: work,
      SERVICE_HOST: daemon.url,
      XDG_CACHE_HOME: path.join(os.tmpdir(), `lmd-test-cache-${process.getuid?.() ?? "u"}`),
    },
  });
  const json = out.slice(out.indexOf('{"model"'));
  const answer = JSON.parse(json) as { model: string; results: { index: number; relevance_score: number }[] };
  t.equal(answer.model, "bge-reranker");
  t.equal(answer.results.length, 2, "top_n 2");
  for (const r of answer.results) {
    t.ok([0, 1, 2].includes(r.index), `index ${r.index}`);
    t.ok(r.relevance_score >= 0 && r.relevance_score <= 1, `score ${r.relevance_score} in [0, 1]`);
  }
  t.ok(answer.results[0]!.relevance_score >= answer.results[1]!.relevance_score, "best first");
});
