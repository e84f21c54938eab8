/**
 * Parent side of a runner: runs jobs on a loaded child over IPC (spawn.ts starts it), and turns every
 * way a child can fail (load error, timeout, crash, signal) into the contract's typed errors.
 */
import type { ChildProcess } from "node:child_process";
import { BadRequestError, ModelRunError } from "../errors.js";
import { RenderBudget, seconds } from "./render-budget.js";
import { TokenParts } from "./token-parts.js";
import { jobLimitError } from "./limits.js";
import type { CompletionRequest, CompletionSink, JobStats, RunnerHandle } from "./handle.js";
import type { FromRunner, RunnerFailureKind, ToRunner } from "./protocol.js";
import { spawnRunner, type RunnerOptions } from "./spawn.js";
import type { ChatResult, EmbedJob, EmbedResult, GenerateStats, LoadSpec, RankJob, RankResult, RenderJob, RunnerInfo } from "./types.js";

export type { RunnerOptions } from "./spawn.js";

interface PendingJob {
  /** A completion's output and backpressure; undefined for the other jobs. */
  sink?: CompletionSink | undefined;
  /** A `pause` was sent and its `resume` not yet. */
  paused?: boolean;
  /** The child renders this job's prompt with the model's chat template: timed from its `render-start`. */
  renders?: boolean;
  /** What the sink threw: the job is being cancelled, and fails with it when it ends. */
  failed?: Error;
  /** The `tokens` parts received so far. */
  parts?: TokenParts;
  /** Receives the job's result: GenerateStats, EmbedResult, RankResult, text or tokens by job type. */
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
    const { child, info } = await spawnRunner(spec, options);
    return new Runner(child, info, options);
  }

  /**
   * Runs one completion: its output goes to the sink as it is produced (a chat job's tool calls
   * when it ends); aborting the sink's signal cancels it; while its flow is blocked it pauses.
   */
  complete(request: CompletionRequest, sink: CompletionSink): Promise<GenerateStats> {
    const renders = request.kind === "chat" || request.job.prompt.kind === "chat";
    const message = (id: number): ToRunner => (request.kind === "chat" ? { type: "chat", id, job: request.job } : { type: "generate", id, job: request.job });
    return this.run<GenerateStats>(message, sink.signal, sink, renders);
  }

  /** Computes one raw embedding vector per input. */
  embed(job: EmbedJob, signal?: AbortSignal): Promise<EmbedResult> {
    return this.run<EmbedResult>((id) => ({ type: "embed", id, job }), signal);
  }

  /** The prompt the model's own chat template makes of these turns and tools (nothing generated). */
  render(job: RenderJob, signal?: AbortSignal): Promise<string> {
    return this.run<string>((id) => ({ type: "render", id, job }), signal, undefined, true);
  }

  /** Tokens of `text` with special tokens parsed; BOS/EOS as the vocabulary asks only with `addSpecial`. */
  tokenize(text: string, signal?: AbortSignal, addSpecial = false, parseSpecial = true): Promise<Uint32Array> {
    // The client already left (a truncation search goes on rendering): nothing for the runner to do.
    if (signal?.aborted) return Promise.reject(new ModelRunError("the request was cancelled"));
    return this.run<Uint32Array>(
      (id) => ({ type: "tokenize", id, text, ...(addSpecial ? { addSpecial } : {}), ...(parseSpecial ? {} : { parseSpecial }) }),
      signal,
    );
  }

  /** The text of `tokens`, special tokens included (a token the vocabulary lacks fails as `invalid`). */
  detokenize(tokens: number[], signal?: AbortSignal): Promise<string> {
    return this.run<string>((id) => ({ type: "detokenize", id, tokens }), signal);
  }

  /** Scores each document's relevance to the query (a reranker model). */
  rank(job: RankJob, signal?: AbortSignal): Promise<RankResult> {
    return this.run<RankResult>((id) => ({ type: "rank", id, job }), signal);
  }

  /**
   * Sends a job and settles with its result; aborting `signal` cancels it in the child. `renders`:
   * the child renders the job's prompt with the model's chat template, under the render budget.
   */
  private run<T>(message: (id: number) => ToRunner, signal: AbortSignal | undefined, sink?: CompletionSink, renders = false): Promise<T> {
    if (!this.alive) return Promise.reject(new ModelRunError("the model runner is not running"));
    const id = this.nextId++;
    const msg = message(id);
    const overLimit = jobLimitError(msg);
    if (overLimit !== undefined) return Promise.reject(new BadRequestError(overLimit));
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => this.send({ type: "cancel", id });
      signal?.addEventListener("abort", onAbort, { once: true });
      const cleanup = () => {
        signal?.removeEventListener("abort", onAbort);
        this.renders.stop(id);
      };
      const job: PendingJob = {
        sink,
        renders,
        resolve: (result) => (cleanup(), job.failed ? reject(job.failed) : resolve(result as T)),
        reject: (err) => (cleanup(), reject(err)),
      };
      this.jobs.set(id, job);
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
        this.toSink(msg.id, (sink) => sink.onText(msg.text, msg.logprobs));
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
        this.toSink(msg.id, (sink) => sink.onThinking?.(msg.text));
        this.holdIfBlocked(msg.id);
        break;
      case "chat-done":
        this.chatDone(msg.id, msg.result);
        break;
      case "embedded":
      case "ranked":
        this.onStats?.({ promptEvalCount: msg.result.promptTokens, promptEvalNs: 0, evalCount: 0, evalNs: 0, truncatedTokens: 0 });
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

  /** A chat job ended: its tool calls go to the sink, as the other output did, and its stats settle it. */
  private chatDone(id: number, result: ChatResult): void {
    this.onStats?.(result.stats);
    if (result.toolCalls.length > 0 && result.stats.doneReason !== "cancelled") this.toSink(id, (sink) => sink.onToolCalls?.(result.toolCalls));
    this.jobs.get(id)?.resolve(result.stats);
    this.jobs.delete(id);
  }

  /** Hands output to job `id`'s sink; on a throw the job is cancelled, and fails with the error once the child ended it (slot free again). */
  private toSink(id: number, give: (sink: CompletionSink) => void): void {
    const job = this.jobs.get(id);
    if (!job?.sink || job.failed) return;
    try {
      give(job.sink);
    } catch (err) {
      job.failed = err instanceof Error ? err : new Error(String(err));
      this.send({ type: "cancel", id });
    }
  }

  /**
   * After output was handed on: if its consumer is now blocked, pauses the job in the child until
   * the consumer is ready. What the parent buffers per job is then bounded by the chunks already
   * on their way when the pause arrives (a token or two), not by how long the model runs.
   */
  private holdIfBlocked(id: number): void {
    const job = this.jobs.get(id);
    const flow = job?.sink?.flow;
    if (!job || !flow?.blocked || job.paused || job.failed) return;
    job.paused = true;
    this.send({ type: "pause", id });
    flow.whenReady(() => {
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
    this.options.log.error(
      { model: this.options.name, runner: this.pid, budget },
      "the model's chat template did not render a prompt within SERVICE_RENDER_TIMEOUT; retiring its runner",
    );
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

function jobError(kind: RunnerFailureKind, message: string): Error {
  if (kind === "invalid") return new BadRequestError(message);
  if (kind === "memory") return new ModelRunError("out of memory");
  return new ModelRunError(message);
}
