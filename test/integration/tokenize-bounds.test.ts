/**
 * Tokenizing is linear in the text and stops when its client leaves, and a long answer does not
 * hold the daemon (src/runner/tokens.ts, src/runner/token-parts.ts, src/routes/tokenize.ts), on
 * the real daemon and runner. U+1F600 has no token of its own in the test models' SentencePiece
 * vocabulary: each is written as 4 byte tokens, the case that llama.cpp's tokenizer made
 * quadratic (every such character copied all the tokens made so far). Only ratios measured in one
 * run are asserted.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

const EMOJI = "\u{1F600}";
const KiB = 1024;

t.test("tokenizing is linear, cancellable, and a long answer does not hold the daemon", async (t) => {
  const { url } = await startDaemon(t);
  const tokenize = async (content: string, signal?: AbortSignal) => {
    const t0 = performance.now();
    const res = await postJson(`${url}/api/tokenize`, { model: "tiny", content }, signal ? { signal } : {});
    // Counted, not parsed: the daemon runs in this process, and parsing millions of numbers here
    // would be timed with it.
    const body = await res.text();
    if (!body.startsWith('{"tokens":[') || !body.endsWith("]}")) return { ms: performance.now() - t0, status: res.status, count: undefined };
    let count = body === '{"tokens":[]}' ? 0 : 1;
    for (let at = body.indexOf(","); at >= 0; at = body.indexOf(",", at + 1)) count++;
    return { ms: performance.now() - t0, status: res.status, count };
  };
  t.equal((await tokenize("hi")).status, 200, "the model is loaded");
  const emoji = (bytes: number) => EMOJI.repeat(bytes / 4);

  // Each size three times, alternating; the fastest counts (the machine is shared).
  const best: Record<number, number> = {};
  for (let round = 0; round < 3; round++) {
    for (const size of [256 * KiB, 1024 * KiB, 4096 * KiB]) {
      const r = await tokenize(emoji(size), AbortSignal.timeout(300_000));
      t.equal(r.count, size + 1, `${size / KiB} KiB of emoji: 4 byte tokens each, after the space SentencePiece puts first`);
      best[size] = Math.min(best[size] ?? Infinity, r.ms);
    }
  }
  const quarter = best[1024 * KiB]! / best[256 * KiB]!;
  const four = best[4096 * KiB]! / best[1024 * KiB]!;
  t.ok(
    quarter <= 6,
    `4 × the input (256 KiB → 1 MiB) costs ≤ 6 × the time (${quarter.toFixed(2)} ×: ${Math.round(best[256 * KiB]!)} → ${Math.round(best[1024 * KiB]!)} ms)`,
  );
  t.ok(
    four <= 6,
    `4 × the input (1 MiB → 4 MiB) costs ≤ 6 × the time (${four.toFixed(2)} ×: ${Math.round(best[1024 * KiB]!)} → ${Math.round(best[4096 * KiB]!)} ms)`,
  );

  const requests: [string, (signal: AbortSignal) => Promise<unknown>][] = [
    ["/api/tokenize", (signal) => tokenize(emoji(4096 * KiB), signal)],
    [
      "raw /api/generate",
      (signal) =>
        postJson(`${url}/api/generate`, { model: "tiny", prompt: emoji(4096 * KiB), raw: true, stream: false, options: { num_predict: 1 } }, { signal }).then(
          (r) => r.text(),
        ),
    ],
  ];
  for (const [name, request] of requests) {
    t.test(`a client that leaves stops its tokenizing: ${name}`, async (t) => {
      const full = best[4096 * KiB]!;
      const leaving = new AbortController();
      const big = request(leaving.signal).catch(() => undefined);
      // A quarter of the way through (by how long the same tokenizing took above), the client goes
      // away: tokenizing on regardless would keep the runner for about three quarters more.
      await new Promise((r) => setTimeout(r, full / 4));
      leaving.abort();
      const t0 = performance.now();
      const next = await tokenize("hello", AbortSignal.timeout(300_000));
      const waited = performance.now() - t0;
      await big;
      t.equal(next.status, 200, "the next request is served");
      t.ok(waited < full / 3, `it waited ${Math.round(waited)} ms, not for the rest of the abandoned ${Math.round(full)} ms`);
    });
  }

  t.test("a long answer leaves the daemon answering others", async (t) => {
    // "a" repeated with spaces: one token per word (linear in any case): ~2.5M tokens, ~12 MB of JSON.
    const words = "a ".repeat(2_500_000);
    let done = false;
    let slowest = 0;
    const t0 = performance.now();
    const work = tokenize(words, AbortSignal.timeout(300_000)).finally(() => (done = true));
    while (!done) {
      const s = performance.now();
      await fetch(`${url}/api/version`, { signal: AbortSignal.timeout(60_000) }).then((r) => r.text());
      slowest = Math.max(slowest, performance.now() - s);
      await new Promise((r) => setTimeout(r, 20));
    }
    const r = await work;
    const total = performance.now() - t0;
    t.equal(r.count, 2_500_001, "every token came back (the last space is one more)");
    t.ok(
      slowest < total / 4,
      `/api/version's slowest answer meanwhile (${Math.round(slowest)} ms) is a small part of the tokenize request's ${Math.round(total)} ms`,
    );
  });
});
