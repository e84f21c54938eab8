/**
 * The benchmark's models and lmd daemons, for bench/run.ts and bench/ab-single.ts: a model written
 * by scripts/make-model into the cache, and a daemon started as a user starts it, its store in the
 * cache, answering once `/api/version` does.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { makeModel, type PresetName } from "../src/gguf/make-model.js";
import { installGguf } from "../src/store/install.js";
import { ModelStore } from "../src/store/store.js";
import { freePort } from "./llama-server.js";
import { track } from "./procs.js";

/** The GGUF file of `model`: a path to one, or a make-model preset written into `cache` once. */
export async function benchModel(model: string, cache: string, log?: (msg: string) => void): Promise<string> {
  if (existsSync(model) && model.endsWith(".gguf")) return path.resolve(model);
  mkdirSync(cache, { recursive: true });
  const file = path.join(cache, `${model}.gguf`);
  if (!existsSync(file)) {
    log?.(`writing ${file} (scripts/make-model --preset ${model})`);
    await makeModel(file, { preset: model as PresetName });
  }
  return file;
}

/** Models a daemon's store holds: name → GGUF file and its parameters (e.g. `draft`). */
export type StoreModels = Record<string, { file: string; params?: Record<string, unknown> }>;

export interface LmdOptions {
  /** The built daemon's entry (`dist/src/main.js` of a checkout or a copy of dist/). */
  main: string;
  /** Its store; each of `models` is installed there first. */
  store: string;
  models: StoreModels;
  threads: number;
  gpu?: string | undefined;
  /** More settings (they win over the benchmark's). */
  env?: Record<string, string>;
  /** Sees each line of the daemon's log (stdout); without it the log goes nowhere. */
  onLog?: (line: string) => void;
}

/**
 * A daemon with the settings every figure uses (4,096 tokens a slot, no saved prefixes), answering.
 * Its stdout (the access log) is read only when `onLog` asks: reading it competes with the clients.
 */
export async function startLmd(options: LmdOptions): Promise<{ url: string; child: ChildProcess }> {
  const store = new ModelStore(options.store);
  await store.init();
  for (const [name, m] of Object.entries(options.models)) await installGguf(store, name, m.file, { params: { repeat_penalty: 1, ...m.params } });
  const port = await freePort();
  const child = track(
    spawn(process.execPath, [options.main, "serve"], {
      env: {
        PATH: process.env.PATH ?? "",
        HOME: os.homedir(),
        SERVICE_MODELS: options.store,
        SERVICE_HOST: `127.0.0.1:${port}`,
        SERVICE_THREADS: String(options.threads),
        SERVICE_GPU: options.gpu ?? "false",
        SERVICE_CONTEXT_LENGTH: "4096",
        SERVICE_CACHE_MAX: "0",
        ...(process.env.LD_LIBRARY_PATH ? { LD_LIBRARY_PATH: process.env.LD_LIBRARY_PATH } : {}),
        ...options.env,
      },
      stdio: ["ignore", options.onLog ? "pipe" : "ignore", "inherit"],
    }),
  );
  if (options.onLog && child.stdout) createInterface({ input: child.stdout }).on("line", options.onLog);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300 && child.exitCode === null; i++) {
    if (await fetch(`${url}/api/version`).then((r) => r.ok, () => false)) return { url, child };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`lmd (${options.main}) did not answer /api/version within 30 s`);
}
