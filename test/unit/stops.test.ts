/**
 * The stop search of lmd's generation (src/runner/stops.ts) gives the answers of Ollama's runner
 * (its findStop and containsStopSuffix, written out here as the reference) on held text that grows
 * token by token, split characters (U+FFFD) completed at its end included; and reads a long stop
 * the output keeps echoing once, where the reference reads the held text anew for every token.
 */
import t from "tap";
import { StopSearch } from "../../src/runner/stops.js";

/** Ollama's rules: the first stop in the request's order that occurs; else whether the text ends with a stop's start. */
function reference(text: string, stops: readonly string[]): { index: number; stop: string } | { partial: boolean } {
  for (const stop of stops) {
    const index = text.indexOf(stop);
    if (index >= 0) return { index, stop };
  }
  return {
    partial: stops.some((stop) => Array.from({ length: Math.min(stop.length - 1, text.length) }, (_, n) => text.endsWith(stop.slice(0, n + 1))).some(Boolean)),
  };
}

/** A small deterministic generator (xorshift), so that a failure names its case. */
function random(seed: number): () => number {
  let x = seed || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

t.test("the same answers as Ollama's search, token by token", async (t) => {
  const alphabet = ["a", "b", "ab", "ba", " ", "\uFFFD"];
  let cases = 0;
  let found = 0;
  let partial = 0;
  for (let seed = 1; seed <= 400; seed++) {
    const rnd = random(seed);
    const pick = () => alphabet[Math.floor(rnd() * alphabet.length)]!;
    const stops = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => Array.from({ length: 1 + Math.floor(rnd() * 4) }, pick).join(""));
    const search = new StopSearch(stops);
    let text = "";
    for (let step = 0; step < 12; step++) {
      // A token adds text; sometimes it completes a split character at the end instead.
      if (text.endsWith("\uFFFD") && rnd() < 0.5) text = `${text.slice(0, -1)}${rnd() < 0.5 ? "a" : "b"}`;
      else text += pick();
      const got = search.update(text);
      const want = reference(text, stops);
      cases++;
      if ("stop" in want) found++;
      else if (want.partial) partial++;
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        t.same(got, want, `seed ${seed}, stops ${JSON.stringify(stops)}, text ${JSON.stringify(text)}`);
        return;
      }
      if ("stop" in got) break;
      if (!got.partial && rnd() < 0.5) {
        // Handed out: the held text starts again.
        search.reset();
        text = "";
      }
    }
  }
  t.ok(found > 100 && partial > 100, `${cases} texts, the same answer for each (${found} with a stop, ${partial} ending with a stop's start)`);
});

t.test("the first occurrence; the first stop in the request's order", async (t) => {
  t.same(new StopSearch(["a"]).update("xaxa"), { index: 1, stop: "a" }, "two in one token: the first");
  t.same(new StopSearch(["b", "a"]).update("ab"), { index: 1, stop: "b" }, "the first in the list, not the first in the text");
  const search = new StopSearch(["abc"]);
  t.same(search.update("xab"), { partial: true }, "the start of a stop is held");
  t.same(search.update("xabxabc"), { index: 4, stop: "abc" }, "and found past a false start");
});

t.test("an empty stop is no stop; no stops hold nothing", async (t) => {
  t.ok(new StopSearch(["", ""]).empty);
  t.same(new StopSearch(["", "x"]).update("ax"), { index: 1, stop: "x" });
  t.same(new StopSearch([]).update("anything"), { partial: false });
});

t.test("a long stop echoed for a long time: each character is read once", async (t) => {
  // 16 stops of 100,000 characters and held text that keeps being their start for 2,000 tokens:
  // the reference reads ~10^5 characters per stop at every token (about 3·10^12 in all).
  const stops = Array.from({ length: 16 }, (_, i) => `${"ab".repeat(50_000)}${i}`);
  const search = new StopSearch(stops);
  let text = "";
  let held = true;
  for (let token = 0; token < 2_000 && held; token++) {
    text += "ab";
    const got = search.update(text);
    held = !("stop" in got) && got.partial;
  }
  t.ok(held, "held all along: the text is still the start of a stop");
  t.equal(search.reads, 16 * text.length, `${text.length} characters held, each read once per stop`);
  t.same(search.update(`${text}${"ab".repeat(48_000)}7`), { index: 0, stop: stops[7] }, "and the stop is found when it completes");
});
