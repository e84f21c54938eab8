/**
 * The bounded GGUF reader (src/gguf/gguf.ts) on a real file and on crafted ones: every bad
 * count or length fails fast with a GgufError, never a hang, a crash or a huge allocation.
 */
import t from "tap";
import fs from "node:fs/promises";
import path from "node:path";
import { GgufError, readGgufMetadata } from "../../src/gguf/gguf.js";
import { testGguf } from "../helpers/models.js";

const u32 = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; };
const u64 = (n: bigint | number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); return b; };
const str = (s: string) => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
const header = (kvs: number, tensors = 0) => Buffer.concat([Buffer.from("GGUF"), u32(3), u64(tensors), u64(kvs)]);

t.test("reads a real GGUF", async (t) => {
  const meta = await readGgufMetadata(await testGguf(), {}, { tensors: true });
  t.equal(meta.version, 3);
  t.equal(meta.metadata["general.architecture"], "llama");
  t.equal(meta.metadata["llama.context_length"], 2048);
  t.equal(meta.metadata["tokenizer.ggml.tokens"], null, "a long array is not kept");
  t.equal(meta.arrayLengths["tokenizer.ggml.tokens"], 4096);
  t.ok((meta.parameterCount ?? 0) > 100_000);
});

t.test("crafted files fail fast", async (t) => {
  const dir = t.testdir();
  const cases: Array<[string, Buffer, RegExp]> = [
    ["not gguf", Buffer.from("hello world, not a model"), /not a GGUF file/],
    ["version 1", Buffer.concat([Buffer.from("GGUF"), u32(1), u64(0), u64(0)]), /unsupported GGUF version 1/],
    ["huge key count", header(2 ** 40), /metadata key count .* exceeds the file size/],
    ["huge string", Buffer.concat([header(1), u64(2n ** 62n), Buffer.alloc(16)]), /string length .* exceeds the file size/],
    ["huge array", Buffer.concat([header(1), str("k"), u32(9), u32(4), u64(2n ** 60n)]), /array length .* exceeds the file size/],
    [
      "deep nesting",
      Buffer.concat([header(1), str("k"), u32(9), ...Array.from({ length: 10 }, () => Buffer.concat([u32(9), u64(1)])), Buffer.alloc(64)]),
      /nested too deeply/,
    ],
    ["unknown type", Buffer.concat([header(1), str("k"), u32(99)]), /unknown metadata type 99/],
    ["truncated", Buffer.concat([header(1), str("kkkkkkkkkk"), u32(10)]), /truncated/],
    ["huge tensor count", Buffer.concat([header(0, 2 ** 50)]), /tensor count .* exceeds the file size/],
  ];
  for (const [name, data, message] of cases) {
    const file = path.join(dir, `${name.replace(/ /g, "-")}.gguf`);
    await fs.writeFile(file, data);
    const started = Date.now();
    await t.rejects(readGgufMetadata(file, {}, { tensors: true }), GgufError, name);
    await readGgufMetadata(file, {}, { tensors: true }).catch((err: Error) => t.match(err.message, message, `${name}: ${err.message}`));
    t.ok(Date.now() - started < 1000, `${name} fails fast`);
  }
});
