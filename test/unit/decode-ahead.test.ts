/**
 * Decoding ahead (src/runner/decode-ahead.ts, src/runner/decode-loop.ts) on a fake addon (no native
 * code): the decode of a sampled token is queued before its generation gets the token; asked for, it
 * is sampled from that decode; dropped (the generation stopped, asked for another token, or did not
 * ask within a turn), its cell leaves the KV cache and the sequence records nothing of it.
 */
import t from "tap";
import { DecodeLoop } from "../../src/runner/decode-loop.js";
import { fakeContext, sample, type Next } from "../helpers/fake-context.js";

const goesOn = () => true;
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A loop on a fake context, decoding ahead unless told not to, and sequence 0 with a 3-token prompt decoded. */
async function started(decodesAhead = true, ahead: (token: number) => boolean = goesOn) {
  const fake = fakeContext(512);
  const loop = new DecodeLoop(fake.context, undefined, undefined, decodesAhead);
  const next = loop.next.bind(loop) as unknown as Next;
  const stream = fake.sequence(0);
  const first = await next(stream, [1, 2, 3], sample, ahead);
  fake.events.push("token");
  return { ...fake, loop, next, stream, first, ahead };
}

t.test("a sampled token's decode is queued before its generation gets the token", async (t) => {
  const { events, decodes, next, stream, first, ahead } = await started();
  t.equal(first, 7, "the prompt's token");
  t.same(events, ["decode", "decode", "token"], "the token's own decode was queued before the generation got it");
  t.same(decodes[1], [[0, 1, true]], "that decode is the sampled token alone");
  t.same(stream._contextTokens, [1, 2, 3], "the sequence does not hold the token until its generation asks for it");
  const second = await next(stream, [7], sample, ahead);
  events.push("token");
  t.equal(second, 7, "asked for, it is sampled from the decode already made");
  t.same(events, ["decode", "decode", "token", "decode", "token"], "no second decode of it: the one after is already queued");
  t.same(stream._contextTokens, [1, 2, 3, 7], "the sequence holds it once asked for");
  t.equal(stream._nextTokenIndex, 4);
});

t.test("a generation that ends: the token decoded ahead leaves the KV cache before drop resolves", async (t) => {
  const { loop, removals, stream } = await started();
  await loop.drop(stream as never);
  t.same(removals, [[0, 3, 4]], "its one cell, after the prompt, is removed");
  t.same(stream._contextTokens, [1, 2, 3], "the sequence records nothing of it");
  t.equal(stream._nextTokenIndex, 3);
  t.equal(loop.busy, false, "no decode runs after the drop");
});

t.test("a generation that asks for another token: the one decoded ahead is dropped, the other decoded in its place", async (t) => {
  const { next, decodes, removals, stream, ahead } = await started();
  const replaced = await next(stream, [9], sample, ahead);
  t.equal(replaced, 7);
  t.same(removals, [[0, 3, 4]], "the token decoded ahead left the cache");
  t.same(stream._contextTokens.slice(0, 4), [1, 2, 3, 9], "the replacement holds its place");
  t.same(decodes[2], [[0, 1, true]], "and was decoded on its own");
});

t.test("a generation that has not asked when the decode ends and a turn has passed (paused): dropped, decoded again when asked", async (t) => {
  const { next, decodes, removals, stream, ahead } = await started();
  for (let i = 0; i < 5; i++) await turn();
  t.same(removals, [[0, 3, 4]], "dropped after its decode");
  t.equal(decodes.length, 2, "nothing decoded meanwhile");
  const late = await next(stream, [7], sample, ahead);
  t.equal(late, 7);
  t.equal(decodes.length >= 3, true, "asked for late, it is decoded again");
  t.same(stream._contextTokens, [1, 2, 3, 7], "once");
});

t.test("no decode ahead where the generation would not go on, nor on a loop that does not decode ahead", async (t) => {
  const ends = await started(true, () => false);
  t.same(ends.events, ["decode", "token"], "an end-of-generation token is handed at once, nothing decoded for it");
  const plain = await started(false);
  t.same(plain.events, ["decode", "token"], "a loop without decoding ahead hands the token at once");
  await plain.next(plain.stream, [7], sample, goesOn);
  t.same(plain.removals, [], "and never removes a cell");
});

t.test("two streams decoding ahead share each step", async (t) => {
  const fake = fakeContext(512);
  const loop = new DecodeLoop(fake.context, undefined, undefined, true);
  const next = loop.next.bind(loop) as unknown as Next;
  const streams = [fake.sequence(0), fake.sequence(1)];
  await Promise.all(
    streams.map(async (stream) => {
      let pending = [1, 2, 3];
      for (let i = 0; i < 8; i++) pending = [await next(stream, pending, sample, goesOn)];
      await loop.drop(stream as never);
    }),
  );
  const together = fake.decodes.filter((d) => d.length === 2).length;
  t.ok(together >= 7, `steps holding both streams' tokens: ${together} of ${fake.decodes.length}`);
  t.same(
    streams.map((s) => s._contextTokens.length),
    [3 + 7, 3 + 7],
    "each sequence holds its prompt and the 7 tokens it asked to decode",
  );
  t.same(fake.removals.map(([id, from]) => [id, from]).sort(), [[0, 10], [1, 10]], "each stream's last token, decoded ahead, was dropped");
});
