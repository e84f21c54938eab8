/**
 * Tokenizing a long text (`npm run bench -- --only tokenize`, and the end of a full CPU run): one
 * character without a token of its own (U+1F600, four byte tokens in a SentencePiece vocabulary,
 * the case llama.cpp's tokenizer makes quadratic when given at once) repeated to 256 KiB, 1 MiB and
 * 4 MiB, through `/api/tokenize`, client-timed; the fastest of the rounds for each size.
 */
import type { ChildProcess } from "node:child_process";
import { stopProcess } from "./procs.js";
import type { Row } from "./serving-run.js";

const EMOJI = "\u{1F600}";
const KiB = 1024;

export async function tokenizeRows(o: {
  startLmd(env: Record<string, string>): Promise<{ url: string; child: ChildProcess }>;
  rounds: number;
}): Promise<Row[]> {
  const lmd = await o.startLmd({});
  try {
    const best = new Map<number, number>();
    const sizes = [256 * KiB, 1024 * KiB, 4096 * KiB];
    for (let round = 0; round < o.rounds; round++) {
      for (const size of sizes) {
        const t0 = performance.now();
        const res = await fetch(`${lmd.url}/api/tokenize`, { method: "POST", body: JSON.stringify({ model: "bench", content: EMOJI.repeat(size / 4) }) });
        await res.text();
        if (!res.ok) throw new Error(`/api/tokenize answered ${res.status}`);
        best.set(size, Math.min(best.get(size) ?? Infinity, performance.now() - t0));
      }
    }
    const s = (size: number) => (best.get(size)! / 1000).toFixed(2);
    const ratio = (a: number, b: number) => (best.get(b)! / best.get(a)!).toFixed(2);
    return [
      ["`/api/tokenize` of 1 MiB of U+1F600 (s)", s(1024 * KiB), "—", "≤ 2 s"],
      [
        "the same, 4 × the input: 256 KiB → 1 MiB, 1 MiB → 4 MiB (time ratio)",
        `${s(256 * KiB)} → ${s(1024 * KiB)} → ${s(4096 * KiB)} s`,
        `${ratio(256 * KiB, 1024 * KiB)} ×, ${ratio(1024 * KiB, 4096 * KiB)} ×`,
        "≤ 6 ×",
      ],
    ];
  } finally {
    await stopProcess(lmd.child);
  }
}
