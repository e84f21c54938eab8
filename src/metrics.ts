/**
 * Prometheus metrics (prom-client), one registry per app so that several daemons in one process
 * (the tests) do not share counters. `GET /metrics` serves them in the text format.
 *
 * Labels are bounded: `route` is the matched route pattern (never the raw path), `model` a model
 * that was loaded from the store.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { RequestInfo } from "./http/server.js";
import type { ResolvedModel } from "./store/store.js";
import type { JobStats } from "./runner/handle.js";

/**
 * How often the event-loop delay histogram samples. prom-client's default, 10 ms, is a timer that
 * wakes an idle daemon 100 times a second with no request. A stall is still measured at this rate: it is the lateness of the next sample.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** What the scheduler gauges are read from at scrape time. */
export interface SchedulerGauges {
  readonly queueDepth: number;
  list(): readonly { active: number }[];
}

/** The daemon's metrics and the hooks that feed them. */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"method" | "route" | "status">;
  private readonly duration: Histogram<"route">;
  private readonly promptTokens: Counter<"model">;
  private readonly generatedTokens: Counter<"model">;
  private readonly truncatedTokens: Counter<"model">;
  private readonly ttft: Histogram<"model">;
  private readonly tokensPerSecond: Histogram<"model">;

  constructor(scheduler: () => SchedulerGauges | undefined) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "lmd_", eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    this.requests = new Counter({
      name: "lmd_http_requests_total",
      help: "HTTP requests by route and status",
      labelNames: ["method", "route", "status"],
      registers,
    });
    this.duration = new Histogram({
      name: "lmd_http_request_duration_seconds",
      help: "Time to the end of the response, streams included",
      labelNames: ["route"],
      buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 2, 10, 60, 300],
      registers,
    });
    new Gauge({
      name: "lmd_queue_depth",
      help: "Requests waiting for a slot or a model load",
      registers,
      collect() {
        this.set(scheduler()?.queueDepth ?? 0);
      },
    });
    new Gauge({ name: "lmd_loaded_models", help: "Models resident now", registers, collect() { this.set(scheduler()?.list().length ?? 0); } });
    new Gauge({
      name: "lmd_busy_slots",
      help: "Slots (sequences) running a request now, over all loaded models",
      registers,
      collect() { this.set((scheduler()?.list() ?? []).reduce((n, m) => n + m.active, 0)); },
    });
    this.promptTokens = new Counter({
      name: "lmd_prompt_tokens_evaluated_total",
      help: "Prompt tokens evaluated (prompt-cache hits excluded)",
      labelNames: ["model"],
      registers,
    });
    this.generatedTokens = new Counter({ name: "lmd_tokens_generated_total", help: "Tokens generated", labelNames: ["model"], registers });
    this.truncatedTokens = new Counter({
      name: "lmd_truncated_tokens_total",
      help: "Prompt tokens dropped to fit the context (truncated_tokens)",
      labelNames: ["model"],
      registers,
    });
    this.ttft = new Histogram({
      name: "lmd_time_to_first_token_seconds",
      help: "From the start of a generation in the runner to its first token (prompt evaluation)",
      labelNames: ["model"],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.tokensPerSecond = new Histogram({
      name: "lmd_tokens_per_second",
      help: "Decode speed of each generation (tokens after the first, per second)",
      labelNames: ["model"],
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
      registers,
    });
  }

  /** `createHttpServer`'s `onResponse` hook. */
  readonly onResponse = (info: RequestInfo): void => {
    const route = info.route ?? "unmatched";
    this.requests.inc({ method: info.method, route, status: String(info.status) });
    this.duration.observe({ route }, info.durationMs / 1000);
  };

  /** The scheduler's `onJobStats` hook. */
  readonly onJobStats = (model: ResolvedModel, stats: JobStats): void => {
    const labels = { model: model.display };
    this.promptTokens.inc(labels, stats.promptEvalCount);
    this.generatedTokens.inc(labels, stats.evalCount);
    this.truncatedTokens.inc(labels, stats.truncatedTokens);
    if (stats.evalCount > 0) this.ttft.observe(labels, stats.promptEvalNs / 1e9);
    // evalNs runs from the first token to the last: evalCount − 1 decode steps.
    if (stats.evalCount > 1 && stats.evalNs > 0) this.tokensPerSecond.observe(labels, (stats.evalCount - 1) / (stats.evalNs / 1e9));
  };
}
