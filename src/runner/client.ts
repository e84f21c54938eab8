/**
 * Parent side of a runner: forks the child, loads the model, runs jobs, and turns every way a
 * child can fail (load error, timeout, crash, signal) into the contract's typed errors.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import { BadRequestError, ModelLoadError, ModelRunError } from "../errors.js";
import { GgufError, validateGguf } from "../gguf/gguf.js";
import { formatBytes } from "../units.js";
import { RenderBudget, seconds } from "./render-budget.js";
import { TokenParts } from "./token-parts.js";
import { jobLimitError } from "./limits.js";
import type { RunnerHandle } from "./handle.js";
import type { ChatJob, ChatResult, EmbedJob, EmbedResult, FromRunner, GenerateJob, GenerateStats, LoadSpec, MemoryEstimate, RankJob, RankResult, RenderJob, RunnerFailureKind, RunnerInfo, TokenLogprob, ToRunner } from "./protocol.js";

/** What metrics learn about each finished job. */
export type JobStats = Pick<GenerateStats, "promptEvalCount" | "promptEvalNs" | "evalCount" | "evalNs" | "truncatedTokens">;

/** Path of the compiled child entry. Under a TypeScript loader (tests) the compiled file in dist/ is used. */
export function childEntry(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith(".js")) return here.replace(/client\.js$/, "child/entry.js");
  const compiled = fileURLToPath(new URL("../../dist/src/runner/child/entry.js", import.meta.url));
  if (!existsSync(compiled)) throw new Error(`runner entry ${compiled} is missing: run 'npm run build' first`);
  return compiled;
}

/**
 * The library that gives a runner's contexts one persistent ggml threadpool instead of a thread
 * per decode (src/native/threadpool.c, built by scripts/build-native next to dist/src), or
 * undefined when no C compiler built it.
 */
export function threadpoolLibrary(): string | undefined {
  const file = path.join(path.dirname(childEntry()), "../../../native/lmd-threadpool.so");
  return existsSync(file) ? file : undefined;
}

/**
 * A runner's environment: one libuv thread, the threadpool library preloaded when there is one,
 * and, when the policy file places the model (`gpus`), only those GPUs visible.
 */
export function runnerEnv(gpus?: readonly number[], base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const library = threadpoolLibrary();
  // UV_THREADPOOL_SIZE=1 pins llama.cpp's decode calls to one libuv thread, which doubles decode
  // speed on small machines (../shared/notes/engine-speed.md). It must be set before Node starts.
  const env: NodeJS.ProcessEnv = { ...base, UV_THREADPOOL_SIZE: "1" };
  if (library) env.LD_PRELOAD = [base.LD_PRELOAD, library].filter(Boolean).join(" ");
  if (gpus !== undefined) Object.assign(env, visibleDevicesEnv(gpus));
  return env;
}

/**
 * The variables that restrict the GPUs a process sees, one per backend: the CUDA runtime reads
 * CUDA_VISIBLE_DEVICES, llama.cpp's Vulkan backend GGML_VK_VISIBLE_DEVICES (both before they
 * enumerate devices, so they must be in the environment the child starts with). An empty list
 * hides every GPU. CUDA numbers its devices fastest first unless told to use the PCI bus order,
 * which is nvidia-smi's (and the one an operator reads the indices from).
 */
export function visibleDevicesEnv(gpus: readonly number[]): Record<string, string> {
  const list = gpus.join(",");
  return { CUDA_DEVICE_ORDER: "PCI_BUS_ID", CUDA_VISIBLE_DEVICES: list, GGML_VK_VISIBLE_DEVICES: list };
}

export interface RunnerOptions {
  /** Model name for messages (`failed to load model '<name>'`). */
  name: string;
  log: Logger;
  /** A load that reports no progress for this long is abandoned and the child killed. */
  loadTimeoutMs: number;
  /** A job whose prompt the model's chat template has not rendered after this long kills the child (SERVICE_RENDER_TIMEOUT); undefined = no budget. */
  renderTimeoutMs?: number | undefined;
  /**
   * Decides on the child's memory estimate before anything is loaded: resolves to let the load go
   * ahead (after making room), rejects (a {@link ModelLoadError}) to refuse it. Absent = admit.
   */
  admit?: ((estimate: MemoryEstimate) => Promise<void>) | undefined;
  /** Aborting it while the model loads kills the child and rejects with `load cancelled`. */
  signal?: AbortSignal | undefined;
}

/** Receives generated text as it comes, with its tokens' logprobs when the job asked for them. */
export type OnChunk = (text: string, logprobs?: TokenLogprob[]) => void;

/**
 * Backpressure of whoever takes a job's output (issue 13 item 8): a streaming response whose
 * socket does not drain. Checked after each chunk is handed on; while `blocked`, the runner
 * computes no further token of that job (runner/flow.ts).
 */
export interface OutputFlow {
  /** True while the consumer can take no more (its socket's buffer is full). */
  readonly blocked: boolean;
  /** Calls `then` once, when the consumer can take more again or is gone. */
  whenReady(then: () => void): void;
}

interface PendingJob {
  onChunk: OnChunk;
  onThinking?: ((text: string) => void) | undefined;
  flow?: OutputFlow | undefined;
  /** A `pause` was sent and its `resume` not yet. */
  paused?: boolean;
  /** The child renders this job's prompt with the model's chat template: timed from its `render-start`. */
  renders?: boolean;
  /** The `tokens` parts received so far. */
  parts?: TokenParts;
  /** Receives the job's result: GenerateStats, ChatResult or EmbedResult by job type. */
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
}

/** One runner child process holding one loaded model. */
export class Runner implements RunnerHandle {
  readonly info: RunnerInfo;
  private readonly jobs = new Map<number, PendingJob>();
  private nextId = 1;
  private exited = false;
  private stopping = false;
  /** Why the parent retired the child itself (a render over its budget), for the other jobs' errors. */
  private killedBecause: string | undefined;
  /** The job whose render overran its budget, while the child may still be rendering it. */
  private stuckRender: number | undefined;
  private stuckTimer: NodeJS.Timeout | undefined;
  private readonly renders: RenderBudget;
  /** Called once when the child exits without being asked to. */
  onCrash: ((reason: string) => void) | undefined;
  /** Called with the token counts and timings of each finished job (metrics). */
  onStats: ((stats: JobStats) => void) | undefined;

  private constructor(
    private readonly child: ChildProcess,
    info: RunnerInfo,
    private readonly options: RunnerOptions,
  ) {
    this.info = info;
    this.renders = new RenderBudget(options.renderTimeoutMs, (id) => this.renderOverrun(id));
    child.on("message", (msg: FromRunner) => this.onMessage(msg));
    child.on("exit", (code, signal) => this.onExit(code, signal));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** False once the child exited, or was killed for a render over its budget (its exit may still be on its way). */
  get alive(): boolean {
    return !this.exited && this.killedBecause === undefined;
  }

  /** Forks a child and loads the model; rejects with {@link ModelLoadError} on any failure. */
  static async start(spec: LoadSpec, options: RunnerOptions): Promise<Runner> {
    await checkModelFile(spec.path, options.name); // a malformed file never reaches llama.cpp
    // Cancelled while the file was checked: the abort listener below would never hear of it (an
    // aborted signal fires no more events) and the model would load for nobody.
    if (options.signal?.aborted) throw new ModelLoadError(options.name, "load cancelled");
    const child = fork(childEntry(), [], {
      env: runnerEnv(spec.gpus),
      execArgv: [],
      stdio: ["ignore", "pipe", "pipe", "ipc"],
      serialization: "json",
      // A process group of its own: Ctrl+C in a terminal or a group-wide signal reaches the daemon,
      // which then stops its runners in order, instead of killing them mid-generation.
      detached: true,
    });
    forwardOutput(child, options.log);
    const info = await waitForLoad(child, spec, options);
    return new Runner(child, info, options);
  }

  /**
   * Runs one generation; `onChunk` receives text as it is produced. Aborting `signal` cancels it;
   * while `flow` is blocked the generation pauses.
   */
  generate(job: GenerateJob, onChunk: OnChunk, signal?: AbortSignal, flow?: OutputFlow): Promise<GenerateStats> {
    return this.run<GenerateStats>((id) => ({ type: "generate", id, job }), { onChunk, flow }, signal, job.prompt.kind === "chat");
  }

  /** Runs one chat job; content and thought text arrive through the callbacks as they are produced. */
  chat(job: ChatJob, on: { onChunk: OnChunk; onThinking?: (text: string) => void }, signal?: AbortSignal, flow?: OutputFlow): Promise<ChatResult> {
    return this.run<ChatResult>((id) => ({ type: "chat", id, job }), { ...on, flow }, signal, true);
  }

  /** Computes one raw embedding vector per input. */
  embed(job: EmbedJob, signal?: AbortSignal): Promise<EmbedResult> {
    return this.run<EmbedResult>((id) => ({ type: "embed", id, job }), { onChunk: () => undefined }, signal);
  }

  /** The prompt the model's own chat template makes of these turns and tools (nothing generated). */
  render(job: RenderJob, signal?: AbortSignal): Promise<string> {
    return this.run<string>((id) => ({ type: "render", id, job }), { onChunk: () => undefined }, signal, true);
  }

  /** Tokens of `text` with special tokens parsed; BOS/EOS as the vocabulary asks only with `addSpecial`. */
  tokenize(text: string, signal?: AbortSignal, addSpecial = false, parseSpecial = true): Promise<Uint32Array> {
    // The client already left (a truncation search goes on rendering): nothing for the runner to do.
    if (signal?.aborted) return Promise.reject(new ModelRunError("the request was cancelled"));
    return this.run<Uint32Array>((id) => ({ type: "tokenize", id, text, ...(addSpecial ? { addSpecial } : {}), ...(parseSpecial ? {} : { parseSpecial }) }), { onChunk: () => undefined }, signal);
  }

  /** The text of `tokens`, special tokens included (a token the vocabulary lacks fails as `invalid`). */
  detokenize(tokens: number[], signal?: AbortSignal): Promise<string> {
    return this.run<string>((id) => ({ type: "detokenize", id, tokens }), { onChunk: () => undefined }, signal);
  }

  /** Scores each document's relevance to the query (a reranker model). */
  rank(job: RankJob, signal?: AbortSignal): Promise<RankResult> {
    return this.run<RankResult>((id) => ({ type: "rank", id, job }), { onChunk: () => undefined }, signal);
  }

  /**
   * Sends a job and settles with its result; aborting `signal` cancels it in the child. `renders`:
   * the child renders the job's prompt with the model's chat template, under the render budget.
   */
  private run<T>(message: (id: number) => ToRunner, on: Pick<PendingJob, "onChunk" | "onThinking" | "flow">, signal: AbortSignal | undefined, renders = false): Promise<T> {
    if (!this.alive) return Promise.reject(new ModelRunError("the model runner is not running"));
    const id = this.nextId++;
    const msg = message(id);
    // IPC serialises with JSON.stringify, which overflows the stack on very deep values (a `format`
    // or tool schema nested thousands of levels): refuse those before sending.
    if (nestedDeeperThan(msg, MAX_JOB_DEPTH)) return Promise.reject(new BadRequestError(`request nested too deeply (more than ${MAX_JOB_DEPTH} levels)`));
    const overLimit = jobLimitError(msg);
    if (overLimit !== undefined) return Promise.reject(new BadRequestError(overLimit));
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => this.send({ type: "cancel", id });
      signal?.addEventListener("abort", onAbort, { once: true });
      const cleanup = () => {
        signal?.removeEventListener("abort", onAbort);
        this.renders.stop(id);
      };
      this.jobs.set(id, {
        ...on,
        renders,
        resolve: (result) => (cleanup(), resolve(result as T)),
        reject: (err) => (cleanup(), reject(err)),
      });
      this.send(msg);
      if (signal?.aborted) onAbort();
    });
  }

  /**
   * Asks the child to dispose the model and exit; kills it if it does not within `timeoutMs`.
   * Jobs still running (only at shutdown: an idle model is the only kind evicted) fail at once
   * with `reason`; the child aborts them and waits for them to end before it disposes the model.
   */
  async stop(reason: Error = new ModelRunError("the model was unloaded"), timeoutMs = 10_000): Promise<void> {
    if (this.exited) return;
    this.stopping = true;
    for (const job of this.jobs.values()) job.reject(reason);
    this.jobs.clear();
    const exited = new Promise<void>((resolve) => this.child.once("exit", (code, signal) => {
      if (code !== 0) this.options.log.error({ runner: this.pid, code, signal, model: this.options.name }, "runner did not exit cleanly after unload");
      resolve();
    }));
    this.send({ type: "unload" });
    const timer = setTimeout(() => {
      this.options.log.warn({ runner: this.pid }, "runner did not exit after unload; killing it");
      this.child.kill("SIGKILL");
    }, timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  /** Kills the child at once (second signal, load timeout). */
  kill(): void {
    if (!this.exited) this.child.kill("SIGKILL");
  }

  private send(msg: ToRunner): void {
    if (!this.exited && this.child.connected) this.child.send(msg);
  }

  private onMessage(msg: FromRunner): void {
    this.handle(msg);
    this.retireIfIdle();
  }

  private handle(msg: FromRunner): void {
    switch (msg.type) {
      case "chunk":
        this.jobs.get(msg.id)?.onChunk(msg.text, msg.logprobs);
        this.holdIfBlocked(msg.id);
        break;
      case "done":
        this.onStats?.(msg.stats);
        this.jobs.get(msg.id)?.resolve(msg.stats);
        this.jobs.delete(msg.id);
        break;
      case "render-start":
        // Timed from here, not from sending: a job queued behind other work in the child is not rendering.
        if (this.jobs.get(msg.id)?.renders) this.renders.start(msg.id);
        break;
      case "prompt-ready":
        this.renders.stop(msg.id);
        this.renderEnded(msg.id);
        break;
      case "thinking":
        this.jobs.get(msg.id)?.onThinking?.(msg.text);
        this.holdIfBlocked(msg.id);
        break;
      case "chat-done":
      case "embedded":
      case "ranked":
        this.onStats?.(msg.type === "chat-done" ? msg.result.stats : { promptEvalCount: msg.result.promptTokens, promptEvalNs: 0, evalCount: 0, evalNs: 0, truncatedTokens: 0 });
        this.jobs.get(msg.id)?.resolve(msg.result);
        this.jobs.delete(msg.id);
        break;
      case "rendered":
        this.jobs.get(msg.id)?.resolve(msg.text);
        this.jobs.delete(msg.id);
        break;
      case "tokens": {
        const job = this.jobs.get(msg.id);
        if (!job) break;
        job.parts ??= new TokenParts();
        const tokens = job.parts.add(msg.data, msg.more);
        if (!tokens) break;
        job.resolve(tokens);
        this.jobs.delete(msg.id);
        break;
      }
      case "failed":
        this.jobs.get(msg.id)?.reject(jobError(msg.kind, msg.message));
        this.jobs.delete(msg.id);
        this.renderEnded(msg.id);
        break;
      case "log":
        this.options.log[msg.level]({ runner: this.pid, ...msg.data }, msg.msg);
        break;
      case "batch":
        for (const m of msg.messages) this.handle(m);
        break;
      default:
        break;
    }
  }

  /**
   * After output was handed on: if its consumer is now blocked, pauses the job in the child until
   * the consumer is ready. What the parent buffers per job is then bounded by the chunks already
   * on their way when the pause arrives (a token or two), not by how long the model runs.
   */
  private holdIfBlocked(id: number): void {
    const job = this.jobs.get(id);
    if (!job?.flow?.blocked || job.paused) return;
    job.paused = true;
    this.send({ type: "pause", id });
    job.flow.whenReady(() => {
      job.paused = false;
      if (this.jobs.get(id) === job) this.send({ type: "resume", id });
    });
  }

  /**
   * A job's prompt has not rendered within the budget, timed from when the child began rendering
   * it. The request gets a 400, as other template failures do: the same messages would be as slow
   * again, so a client must not retry them (it retries on 5xx). Nothing can interrupt a template
   * inside the child, so the runner goes: no new job is sent to it (the scheduler drops it now),
   * and it is killed once the jobs of other requests that it still runs have ended. A render that
   * was only slow lets them finish; one still running after a second budget is stuck, and every
   * job behind it with it: the child is then killed at once.
   */
  private renderOverrun(id: number): void {
    const budget = seconds(this.renders.budgetMs ?? 0);
    this.options.log.error({ model: this.options.name, runner: this.pid, budget }, "the model's chat template did not render a prompt within SERVICE_RENDER_TIMEOUT; retiring its runner");
    this.jobs.get(id)?.reject(new BadRequestError(`the model's chat template did not render these messages within ${budget}`));
    this.jobs.delete(id);
    this.send({ type: "cancel", id });
    this.killedBecause = `another request's chat template did not render within ${budget}`;
    this.stuckRender = id;
    // Dropped from the scheduler now: the next request must not be sent to this child.
    this.onCrash?.(this.killedBecause);
    this.retireIfIdle();
    if (!this.exited) this.stuckTimer = setTimeout(() => this.kill(), this.renders.budgetMs ?? 0);
  }

  /** The render of job `id` ended (its prompt is ready, or it failed): it was slow, not stuck. */
  private renderEnded(id: number): void {
    if (this.stuckRender !== id) return;
    this.stuckRender = undefined;
    clearTimeout(this.stuckTimer);
    this.retireIfIdle();
  }

  /** A runner retired for a slow render is killed once no job of another request runs on it. */
  private retireIfIdle(): void {
    if (this.killedBecause !== undefined && this.jobs.size === 0) this.kill();
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = true;
    this.renders.clear();
    clearTimeout(this.stuckTimer);
    const how = signal ? `signal ${signal}` : `exit status ${code}`;
    const error = this.killedBecause ? `the model runner was stopped: ${this.killedBecause}` : `the model runner stopped unexpectedly (${how})`;
    for (const job of this.jobs.values()) job.reject(new ModelRunError(error));
    this.jobs.clear();
    if (!this.stopping && !this.killedBecause) {
      this.options.log.error({ runner: this.pid, code, signal, model: this.options.name }, "runner exited unexpectedly");
      this.onCrash?.(how);
    }
  }
}

/** Deepest nesting of a job sent to a runner (the job's own envelope takes about five levels). */
const MAX_JOB_DEPTH = 128;

/** True when `value` nests objects/arrays more than `limit` levels; stops looking at the limit. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (limit === 0) return true;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (nestedDeeperThan(v, limit - 1)) return true;
  return false;
}

/**
 * Validates the GGUF structure before any child is forked: node-llama-cpp's own reader spins or
 * throws on crafted counts and lengths, and llama.cpp trusts tensor offsets (see models/gguf.ts).
 */
async function checkModelFile(file: string, name: string): Promise<void> {
  try {
    await validateGguf(file);
  } catch (err) {
    if (err instanceof GgufError) throw new ModelLoadError(name, `corrupt model file: ${err.message}`);
    throw new ModelLoadError(name, "the model file could not be read", err);
  }
}

function jobError(kind: RunnerFailureKind, message: string): Error {
  if (kind === "invalid") return new BadRequestError(message);
  if (kind === "memory") return new ModelRunError("out of memory");
  return new ModelRunError(message);
}

function loadError(name: string, kind: RunnerFailureKind, message: string): ModelLoadError {
  if (kind === "corrupt") return new ModelLoadError(name, `corrupt model file: ${message}`);
  if (kind === "memory") return new ModelLoadError(name, `not enough memory to load the model (${message})`);
  return new ModelLoadError(name, message);
}

function waitForLoad(child: ChildProcess, spec: LoadSpec, options: RunnerOptions): Promise<RunnerInfo> {
  return new Promise<RunnerInfo>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const fail = (err: ModelLoadError) => {
      finish();
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      reject(err);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        options.log.error({ model: options.name, timeoutMs: options.loadTimeoutMs }, "model load made no progress; killing its runner");
        fail(new ModelLoadError(options.name, `timed out after ${Math.round(options.loadTimeoutMs / 1000)}s without progress`));
      }, options.loadTimeoutMs);
    };
    const onMessage = (msg: FromRunner) => {
      if (msg.type === "progress") arm();
      else if (msg.type === "estimate") {
        // The memory check may evict other models first; the no-progress timer waits meanwhile.
        clearTimeout(timer);
        const admit = options.admit ?? (() => Promise.resolve());
        admit(msg.estimate).then(
          () => (child.send({ type: "admit" } satisfies ToRunner), arm()),
          (err: unknown) => fail(err instanceof ModelLoadError ? err : new ModelLoadError(options.name, String(err))),
        );
      } else if (msg.type === "loaded") {
        finish();
        options.log.info({ model: options.name, runner: child.pid, ram: formatBytes(msg.info.ramBytes), contextSize: msg.info.contextSize, sequences: msg.info.sequences, gpu: msg.info.gpu, threads: msg.info.threads, binary: msg.info.binary, threadpool: msg.info.threadpool }, "model loaded");
        resolve(msg.info);
      } else if (msg.type === "load-failed") {
        options.log.error({ model: options.name, kind: msg.kind, detail: msg.message }, "model failed to load");
        fail(loadError(options.name, msg.kind, msg.message));
      } else if (msg.type === "log") options.log[msg.level]({ runner: child.pid, ...msg.data }, msg.msg);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      options.log.error({ model: options.name, code, signal }, "runner exited while loading the model");
      fail(new ModelLoadError(options.name, `the model runner exited while loading (${signal ? `signal ${signal}` : `exit status ${code}`})`));
    };
    const onError = (err: Error) => fail(new ModelLoadError(options.name, `could not start the model runner: ${err.message}`, err));
    // Every request waiting for this load went away: stop it rather than load a model nobody asked for.
    const onAbort = () => fail(new ModelLoadError(options.name, "load cancelled"));
    function finish() {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      child.off("message", onMessage);
      child.off("exit", onExit);
      child.off("error", onError);
    }
    child.on("message", onMessage);
    child.on("exit", onExit);
    child.on("error", onError);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    arm();
    child.send({ type: "load", spec } satisfies ToRunner);
  });
}

/** Lines a child prints outside the protocol (native libraries write to stderr) go to the log. */
function forwardOutput(child: ChildProcess, log: Logger): void {
  for (const [stream, level] of [[child.stdout, "debug"], [child.stderr, "warn"]] as const) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      if (line.trim()) log[level]({ runner: child.pid }, `runner output: ${line}`);
    });
  }
}
