/**
 * Token lists between a runner and the daemon (src/runner/token-parts.ts): packed 32-bit integers
 * in base64, in parts of a bounded size, so that a list of millions of tokens never reaches the
 * daemon as one JSON array that it must parse in one go. Each part goes through JSON as the IPC
 * channel sends it, and the parts come back as the same list.
 */
import t from "tap";
import { PART_TOKENS, TokenParts, tokenMessages } from "../../src/runner/token-parts.js";

t.test("a long token list travels in bounded parts and comes back whole", async (t) => {
  const tokens = Array.from({ length: 2 * PART_TOKENS + 123 }, (_, i) => (i * 2654435761) % 2 ** 32);
  tokens[5] = 2 ** 32 - 1;
  const messages = [...tokenMessages(7, tokens)];
  t.equal(messages.length, 3, "three parts");
  const sizes = messages.map((m) => JSON.stringify(m).length);
  t.ok(Math.max(...sizes) <= Math.ceil((PART_TOKENS * 4) / 3) * 4 + 100, `each message at most a part's base64 (largest ${Math.max(...sizes)} characters)`);
  t.same(messages.map((m) => (m.type === "tokens" ? m.more === true : undefined)), [true, true, false], "every part but the last says more follow");
  const parts = new TokenParts();
  let whole: Uint32Array | undefined;
  for (const m of messages) {
    const sent = JSON.parse(JSON.stringify(m)) as { id: number; data: string; more?: boolean };
    t.equal(sent.id, 7);
    whole = parts.add(sent.data, sent.more);
    if (sent.more) t.equal(whole, undefined, "nothing until the last part");
  }
  t.equal(whole?.length, tokens.length, "as many tokens");
  t.equal(tokens.filter((token, i) => whole?.[i] !== token).length, 0, "the same tokens, the largest id included");
});

t.test("an empty list is one message", async (t) => {
  const messages = [...tokenMessages(1, [])];
  t.equal(messages.length, 1);
  const m = messages[0]!;
  t.same(m.type === "tokens" ? Array.from(new TokenParts().add(m.data, m.more) ?? [1]) : [1], []);
});
