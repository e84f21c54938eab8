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
    const body = (await res.json()) as { tokens: number[] };
    return { ms: performance.now() - t0, status: res.status, count: body.tokens?.length };
  };
  t.equal((await tokenize("hi")).status, 200, "the model is loaded");
  const emoji = (bytes: number) => EMOJI.repeat(bytes / 4);

  // Each size twice, alternating; the faster of the two counts (the machine is shared).
  const best: Record<number, number> = {};
  for (let round = 0; round < 2; round++) {
    for (const size of [256 * KiB, 1024 * KiB, 4096 * KiB]) {
      const r = await tokenize(emoji(size), AbortSignal.timeout(300_000));
      t.equal(r.count, size + 1, `${size / KiB} KiB of emoji: 4 byte tokens each, after the space SentencePiece puts first`);
      best[size] = Math.min(best[size] ?? Infinity, r.ms);
    }
  }
  const quarter = best[1024 * KiB]! / best[256 * KiB]!;
  const four = best[4096 * KiB]! / best[1024 * KiB]!;
  t.ok(quarter <= 6, `4 × the input (256 KiB → 1 MiB) costs ≤ 6 × the time (${quarter.toFixed(2)} ×: ${Math.round(best[256 * KiB]!)} → ${Math.round(best[1024 * KiB]!)} ms)`);
  t.ok(four <= 6, `4 × the input (1 MiB → 4 MiB) costs ≤ 6 × the time (${four.toFixed(2)} ×: ${Math.round(best[1024 * KiB]!)} → ${Math.round(best[4096 * KiB]!)} ms)`);

  t.test("a client that leaves stops its tokenizing", async (t) => {
    const full = best[4096 * KiB]!;
    const leaving = new AbortController();
    const big = tokenize(emoji(4096 * KiB), leaving.signal).catch(() => undefined);
    // Half way through (as long as the same tokenizing took above), the client goes away.
    await new Promise((r) => setTimeout(r, full / 2));
    leaving.abort();
    const t0 = performance.now();
    const next = await tokenize("hello", AbortSignal.timeout(300_000));
    const waited = performance.now() - t0;
    await big;
    t.equal(next.status, 200, "the next request is served");
    t.ok(waited < full / 4, `it waited ${Math.round(waited)} ms, not for the rest of the abandoned ${Math.round(full)} ms`);
  });

  t.test("a long answer leaves the daemon answering others", async (t) => {
    // "a" repeated with spaces: one token per word (linear before the fix too): ~2.5M tokens, ~12 MB of JSON.
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
    t.ok(slowest < total / 4, `/api/version's slowest answer meanwhile (${Math.round(slowest)} ms) is a small part of the tokenize request's ${Math.round(total)} ms`);
  });
});
