/**
 * Run by test/integration/threadpool.test.ts with the threadpool library preloaded, as a runner
 * runs: `node thread-flips.mjs MODEL FLIPS`. Changes a context's threads 1 ↔ 2 FLIPS times, with
 * one decode after each change (what a runner's governor does beside a neighbour that comes and
 * goes), then prints how many tokens it sent and how many the context holds, and frees it. Plain
 * JavaScript: it runs without the tests' TypeScript loader.
 */
import { getLlama } from "node-llama-cpp";

const [file, flips] = process.argv.slice(2);
const llama = await getLlama({ gpu: false, build: "never", maxThreads: 0, progressLogs: false });
const model = await llama.loadModel({ modelPath: file });
const context = await model.createContext({ contextSize: 2048, threads: 2, sequences: 1 });
const sequence = context.getSequence();
let sent = 0;
for (let i = 0; i < Number(flips); i++) {
  context._ctx.setThreads(i % 2 === 0 ? 1 : 2);
  const tokens = model.tokenize(` word ${i}`);
  await sequence.evaluateWithoutGeneratingNewTokens(tokens);
  sent += tokens.length;
}
process.stdout.write(`${JSON.stringify({ sent, held: sequence.contextTokens.length })}\n`);
await context.dispose();
await model.dispose();
await llama.dispose();
