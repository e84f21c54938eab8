/**
 * GGUF validation (src/gguf/gguf.ts) against a corpus of crafted files and against thousands of
 * random mutations (fast-check): every bad file is refused with a GgufError, quickly, and nothing
 * else ever escapes (no RangeError, no hang, no huge allocation).
 */
import t from "tap";
import fc from "fast-check";
import fs from "node:fs/promises";
import path from "node:path";
import { GgufError, readGgufMetadata, validateGguf } from "../../src/gguf/gguf.js";
import { buildGguf, craftedCorpus, kv } from "../helpers/crafted-gguf.js";
import { testGguf } from "../helpers/models.js";

/** Validates `data` (written to `file`); returns the outcome and how long it took. */
async function check(file: string, data: Buffer): Promise<{ ok: boolean; err?: unknown; ms: number }> {
  await fs.writeFile(file, data);
  const started = performance.now();
  try {
    await validateGguf(file);
    return { ok: true, ms: performance.now() - started };
  } catch (err) {
    return { ok: false, err, ms: performance.now() - started };
  }
}

t.test("sound files pass: the crafted base and a real model", async (t) => {
  const dir = t.testdir();
  const base = await check(path.join(dir, "base.gguf"), buildGguf());
  t.ok(base.ok, `base passes: ${String(base.err)}`);
  const meta = await validateGguf(await testGguf());
  t.equal(meta.metadata["general.architecture"], "llama");
  t.ok((meta.parameterCount ?? 0) > 100_000, "parameters counted");
  t.ok((meta.dataOffset ?? 0) % 32 === 0, "data offset aligned");
});

t.test("every crafted file is refused with its reason, fast", async (t) => {
  const dir = t.testdir();
  const corpus = craftedCorpus();
  t.ok(corpus.length >= 30, `${corpus.length} crafted files`);
  for (const c of corpus) {
    const r = await check(path.join(dir, "f.gguf"), c.data);
    if (r.ok) {
      t.fail(`${c.name}: accepted`);
      continue;
    }
    t.ok(r.err instanceof GgufError, `${c.name}: a GgufError`);
    t.match((r.err as Error).message, c.message, `${c.name}: ${(r.err as Error).message}`);
    t.ok(r.ms < 500, `${c.name}: refused in ${r.ms.toFixed(1)} ms`);
  }
});

t.test("metadata keys from the file cannot touch prototypes", async (t) => {
  const dir = t.testdir();
  const file = path.join(dir, "proto.gguf");
  await fs.writeFile(file, buildGguf({ kvs: [kv.str("__proto__", "x"), kv.u32s("constructor", [1, 2]), kv.u32("general.alignment", 32)] }));
  const meta = await readGgufMetadata(file);
  t.equal(meta.metadata.__proto__, "x", "kept as a plain key");
  t.same(meta.metadata.constructor, [1, 2]);
  t.equal(({} as Record<string, unknown>).constructor, Object, "Object.prototype untouched");
});

/** Mutations: a truncation and a few overwritten bytes (often numbers the format reads as counts). */
const mutation = (length: number) =>
  fc.record({
    cut: fc.option(fc.nat({ max: length }), { nil: undefined }),
    writes: fc.array(
      fc.record({
        at: fc.nat({ max: Math.max(0, length - 8) }),
        value: fc.oneof(
          fc.constantFrom(0n, 1n, 2n ** 31n, 2n ** 32n - 1n, 2n ** 40n, 2n ** 62n, 2n ** 63n, 2n ** 64n - 1n),
          fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        ),
        width: fc.constantFrom(1, 4, 8),
      }),
      { minLength: 0, maxLength: 4 },
    ),
  });

function mutate(source: Buffer, m: { cut: number | undefined; writes: Array<{ at: number; value: bigint; width: number }> }): Buffer {
  const out = Buffer.from(source);
  for (const w of m.writes) {
    if (w.at + w.width > out.length) continue;
    if (w.width === 8) out.writeBigUInt64LE(w.value, w.at);
    else if (w.width === 4) out.writeUInt32LE(Number(w.value % 2n ** 32n), w.at);
    else out.writeUInt8(Number(w.value % 256n), w.at);
  }
  return m.cut === undefined ? out : out.subarray(0, m.cut);
}

t.test("random mutations of the crafted base: refused cleanly or accepted, never anything else", async (t) => {
  const dir = t.testdir();
  const base = buildGguf();
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(mutation(base.length), async (m) => {
      const r = await check(path.join(dir, "m.gguf"), mutate(base, m));
      if (!r.ok && !(r.err instanceof GgufError)) throw new Error(`escaped: ${String(r.err)}`);
      if (r.ms > 1000) throw new Error(`took ${r.ms} ms`);
      if (!r.ok) refused++;
    }),
    { numRuns: 1500, seed: 9 },
  );
  t.ok(refused > 500, `${refused} of 1500 mutants refused`);
});

t.test("random mutations of a real model's header", async (t) => {
  const dir = t.testdir();
  const real = await fs.readFile(await testGguf());
  const meta = await validateGguf(await testGguf());
  const header = real.subarray(0, meta.dataOffset);
  const data = real.subarray(meta.dataOffset);
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(mutation(header.length), fc.boolean(), async (m, keepData) => {
      const mutated = mutate(header, m);
      const r = await check(path.join(dir, "r.gguf"), m.cut === undefined && keepData ? Buffer.concat([mutated, data]) : mutated);
      if (!r.ok && !(r.err instanceof GgufError)) throw new Error(`escaped: ${String(r.err)}`);
      if (r.ms > 1000) throw new Error(`took ${r.ms} ms`);
      if (!r.ok) refused++;
    }),
    { numRuns: 150, seed: 11 },
  );
  t.ok(refused > 50, `${refused} of 150 mutants refused`);
});
