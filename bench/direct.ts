/**
 * The baseline: node-llama-cpp called directly in one process, with the same model, threads and
 * sampling lmd uses. Forked by bench/run.ts with UV_THREADPOOL_SIZE=1 (as lmd's runner children
 * are) and driven over IPC: each message is one measurement, answered with its numbers.
 */
import { flashAttentionFor } from "../src/runner/attention.js";
import { getLlama, LlamaCompletion, LlamaLogLevel, type LlamaContext, type LlamaContextSequence, type LlamaModel } from "node-llama-cpp";

export type DirectRequest =
  | { op: "load"; model: string; threads: number; sequences: number; contextSize: number; gpu?: "cuda" | "vulkan" | undefined }
  | { op: "decode"; prompt: string; tokens: number; streams: number }
  | { op: "ttft"; prompt: string; prefillTokens?: boolean }
  | { op: "exit" };

export interface DecodeResult {
  /** Per stream: tokens generated and ms from its first to its last token. */
  streams: { tokens: number; firstMs: number; lastMs: number }[];
}

let model: LlamaModel | undefined;
let context: LlamaContext | undefined;
let sequences: LlamaContextSequence[] = [];
/** One LlamaCompletion per sequence, kept like lmd's runner keeps one per slot. */
let completions: LlamaCompletion[] = [];

/** The sampling lmd uses by default (Ollama's defaults; greedy-equivalent speed, top-k kept). */
const SAMPLING = { temperature: 0.8, topK: 40, topP: 0.9, minP: 0, seed: 1 };

async function load(req: Extract<DirectRequest, { op: "load" }>): Promise<unknown> {
  const llama = await getLlama({ gpu: req.gpu ?? false, build: "never", maxThreads: req.threads, progressLogs: false, logLevel: LlamaLogLevel.warn });
  // On a GPU, every layer offloaded, as lmd and llama-server (`-ngl 999`) have it in the benchmark.
  model = await llama.loadModel({ modelPath: req.model, ...(req.gpu ? { gpuLayers: "max" as const } : {}) });
  // Flash attention as lmd's runner sets it for SERVICE_FLASH_ATTENTION=auto (src/runner/attention.ts).
  const flashAttention = flashAttentionFor({}, model.fileInsights, model.gpuLayers);
  context = await model.createContext({
    contextSize: req.contextSize,
    sequences: req.sequences,
    threads: req.threads,
    ...(flashAttention === undefined ? {} : { flashAttention }),
  });
  sequences = Array.from({ length: req.sequences }, () => context!.getSequence());
  completions = sequences.map((contextSequence) => new LlamaCompletion({ contextSequence }));
  const devices = llama.gpu ? await llama.getGpuDeviceNames() : [];
  return { flashAttention: context.flashAttention, gpu: llama.gpu, devices, gpuLayers: model.gpuLayers, threads: req.threads };
}

/** `streams` concurrent completions of `tokens` tokens each, on fresh sequences state. */
async function decode(req: Extract<DirectRequest, { op: "decode" }>): Promise<DecodeResult> {
  const t0 = performance.now();
  const streams = await Promise.all(
    sequences.slice(0, req.streams).map(async (sequence, i) => {
      await sequence.clearHistory();
      const completion = completions[i]!;
      let first = 0;
      let last = 0;
      let tokens = 0;
      await completion.generateCompletion(`${i} ${req.prompt}`, {
        ...SAMPLING,
        maxTokens: req.tokens,
        onToken: (t) => {
          const now = performance.now() - t0;
          if (tokens === 0) first = now;
          last = now;
          tokens += t.length;
        },
      });
      return { tokens, firstMs: first, lastMs: last };
    }),
  );
  return { streams };
}

/** Time from the call to the first token of a 1-token completion (the prompt is evaluated fresh). */
async function ttft(req: Extract<DirectRequest, { op: "ttft" }>): Promise<{ ms: number; promptTokens: number }> {
  const sequence = sequences[0]!;
  await sequence.clearHistory();
  const completion = completions[0]!;
  const promptTokens = model!.tokenize(req.prompt).length + 1;
  const t0 = performance.now();
  let ms = 0;
  await completion.generateCompletion(req.prompt, { ...SAMPLING, maxTokens: 1, onToken: () => (ms ||= performance.now() - t0) });
  return { ms, promptTokens };
}

process.on("message", (msg: DirectRequest) => {
  const run = async (): Promise<unknown> => {
    switch (msg.op) {
      case "load":
        return load(msg);
      case "decode":
        return decode(msg);
      case "ttft":
        return ttft(msg);
      case "exit":
        await context?.dispose();
        await model?.dispose();
        process.exit(0);
    }
  };
  run().then(
    (result) => process.send?.({ ok: true, result }),
    (err: unknown) => process.send?.({ ok: false, error: String(err) }),
  );
});
