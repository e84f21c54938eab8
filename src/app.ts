/**
 * `createApp(config, deps)`: builds the daemon (store, scheduler, routes, HTTP server) without
 * listening or touching process-wide state. `main.ts` and the tests both use it.
 */
import { createServer, type AddressInfo } from "node:net";
import type { Server } from "node:http";
import type { Logger } from "pino";
import { ConfigError, type Config } from "./config.js";
import { createGuards } from "./http/guards.js";
import { Router } from "./http/router.js";
import { listenOn } from "./http/listen.js";
import { createHttpServer, type ServerLimits } from "./http/server.js";
import { streamLimits } from "./http/respond.js";
import { collectGarbage } from "./store/gc.js";
import { ensureDemoModel } from "./store/demo.js";
import { ModelStore } from "./store/store.js";
import { generateRoutes } from "./routes/generate.js";
import { chatRoutes } from "./routes/chat.js";
import { embedRoutes } from "./routes/embed.js";
import { tokenizeRoutes } from "./routes/tokenize.js";
import { rerankRoutes } from "./routes/rerank.js";
import { openaiRoutes } from "./routes/openai/index.js";
import { anthropicRoutes } from "./routes/anthropic/messages.js";
import { blobRoutes } from "./routes/blobs.js";
import { createRoutes } from "./routes/create.js";
import { modelRoutes } from "./routes/models.js";
import { pullRoutes } from "./routes/pull.js";
import { pushRoutes } from "./routes/push.js";
import { psRoutes } from "./routes/ps.js";
import { metricsRoutes } from "./routes/metrics.js";
import { Metrics } from "./metrics.js";
import { rootRoutes } from "./routes/root.js";
import { healthRoutes } from "./routes/health.js";
import type { Services } from "./chat/services.js";
import { Runner } from "./runner/client.js";
import { Scheduler, type StartRunner } from "./scheduler/scheduler.js";
import { PolicyTable, readPolicyFile } from "./scheduler/policy.js";
import { preloadModels, type PreloadHooks } from "./scheduler/preload.js";
import { VERSION } from "./version.js";

export interface AppDeps {
  log: Logger;
  /** Replaces how runners start (unit tests). */
  startRunner?: StartRunner;
  /** Write the demo model into an empty store (default true). */
  demoModel?: boolean;
  /** Overrides of the HTTP server's limits (tests: short timeouts, a small connection cap). */
  httpLimits?: Partial<ServerLimits>;
}

export interface App {
  server: Server;
  services: Services;
  /** Listens where the configuration says, then writes the demo model into an empty store; resolves with the bound address. */
  listen(): Promise<AddressInfo>;
  /** Graceful shutdown: refuse new work, drain within the timeout, unload every model, stop listening. */
  close(): Promise<void>;
  /**
   * Re-reads SERVICE_MODELS_CONFIG (reload, SIGHUP); an invalid file is logged at error and the
   * policy in force kept. Reloads run one at a time; one asked for while another waits to start
   * joins it. Resolves when the new policy is in force (before its preloads), with the outcome.
   */
  reloadPolicy(): Promise<ReloadOutcome>;
  /** Loads the models the policy marks `preload` (after listening; failures are logged). */
  preload(hooks?: PreloadHooks): Promise<void>;
}

/** What a reload did: `error` says why the file was refused (and the old policy kept). */
export type ReloadOutcome = { ok: true; models: string[] } | { ok: false; error: string };

export async function createApp(config: Readonly<Config>, deps: AppDeps): Promise<App> {
  const { log } = deps;
  // A bad policy file is a configuration error: found before anything is written.
  let policy = PolicyTable.EMPTY;
  if (config.modelsConfig) {
    try {
      policy = await readPolicyFile(config.modelsConfig);
    } catch (err) {
      throw new ConfigError("SERVICE_MODELS_CONFIG", (err as Error).message);
    }
  }
  streamLimits.stallMs = config.writeTimeoutMs; // one daemon per process
  const store = new ModelStore(config.models);
  await store.init();
  const gc = await collectGarbage(store); // orphans of crashes and failures (store/gc.ts)
  if (gc.blobs.length + gc.partials.length > 0 || gc.skippedBlobs) log.info(gc, "model store: removed orphan blobs and stale partial downloads");
  let scheduler: Scheduler | undefined = undefined;
  const metrics = new Metrics(() => scheduler);
  scheduler = new Scheduler({
    log,
    numParallel: config.numParallel,
    maxLoaded: config.maxLoadedModels,
    maxQueue: config.maxQueue,
    defaultKeepAliveMs: config.keepAliveMs,
    defaultContextLength: config.contextLength,
    threads: config.threads,
    gpu: config.gpu,
    gpuOverheadBytes: config.gpuOverheadBytes,
    streamIntervalMs: config.streamIntervalMs,
    kvCacheType: config.kvCacheType,
    prefixCache: config.cacheMaxBytes > 0 ? { dir: config.cacheDir, maxBytes: config.cacheMaxBytes, minTokens: config.cacheMinTokens } : undefined,
    flashAttention: config.flashAttention,
    // A child process per model; the scheduler knows it only as a RunnerHandle.
    startRunner:
      deps.startRunner ??
      ((spec, model, hooks) =>
        Runner.start(spec, { name: model.display, log, loadTimeoutMs: config.loadTimeoutMs, renderTimeoutMs: config.renderTimeoutMs, ...hooks })),
    onJobStats: metrics.onJobStats,
    policy: () => policy,
  });
  const services: Services = { config, store, scheduler, version: VERSION };
  const router = new Router();
  rootRoutes(router, services);
  healthRoutes(router, services);
  generateRoutes(router, services);
  chatRoutes(router, services);
  embedRoutes(router, services);
  tokenizeRoutes(router, services);
  rerankRoutes(router, services);
  openaiRoutes(router, services);
  anthropicRoutes(router, services);
  modelRoutes(router, services);
  const stopBlobCollection = blobRoutes(router, services);
  createRoutes(router, services);
  pullRoutes(router, services);
  pushRoutes(router, services);
  psRoutes(router, services);
  metricsRoutes(router, metrics);
  const http = createHttpServer({
    router,
    guards: createGuards(config),
    log,
    maxBodyBytes: config.maxBodyBytes,
    onResponse: metrics.onResponse,
    ...(deps.httpLimits ? { limits: deps.httpLimits } : {}),
  });
  const { server } = http;

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      http.startDraining(); // every request received from now on → 503 "server is shutting down"
      scheduler.startDraining(); // /readyz unready; requests already received, queued or loading, are still served
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const drained = await Promise.race([scheduler.drain().then(() => true), delay(config.shutdownTimeoutMs).then(() => false)]);
      if (!drained) log.warn({ timeoutMs: config.shutdownTimeoutMs }, "shutdown timeout reached; stopping in-flight requests");
      await scheduler.unloadAll(); // what is left gets 503 (a stream: its last line); runners dispose their models and exit
      server.closeAllConnections();
      await stopped;
      stopBlobCollection();
    })());

  const preload = (hooks?: PreloadHooks) => preloadModels(policy, store, scheduler, log, hooks);
  const readPolicy = async (): Promise<ReloadOutcome> => {
    if (!config.modelsConfig) return { ok: true, models: [] };
    try {
      policy = await readPolicyFile(config.modelsConfig);
    } catch (err) {
      const error = (err as Error).message;
      log.error({ err: error }, "policy file not reloaded; the policy in force stays");
      return { ok: false, error };
    }
    const models = policy.entries().map((p) => p.name);
    log.info({ file: config.modelsConfig, models }, "policy file reloaded");
    scheduler.applyPolicy();
    void preload();
    return { ok: true, models };
  };
  // One reload at a time (a burst of SIGHUPs reads the file once or twice, never in parallel).
  let tail: Promise<unknown> = Promise.resolve();
  let waiting: Promise<ReloadOutcome> | undefined;
  const reloadPolicy = (): Promise<ReloadOutcome> => {
    if (waiting) return waiting;
    const next = tail.then(() => {
      waiting = undefined;
      return readPolicy();
    });
    waiting = next;
    tail = next.catch(() => undefined);
    return next;
  };

  return {
    server,
    services,
    close,
    reloadPolicy,
    preload,
    // An address that cannot be bound must fail before anything is written to the store, but the
    // daemon must not answer before the demo model exists (the first request after start would
    // find no model): so a throwaway socket proves the address first, then the demo model is
    // written, then the server listens.
    listen: async () => {
      if (deps.demoModel !== false) {
        if (config.listen.port !== 0) await probeListen(config.listen);
        await ensureDemoModel(store, log);
      }
      return listenOn(server, config.listen);
    },
  };
}

/** Binds and releases the address: fails as listening would (EADDRINUSE, EADDRNOTAVAIL, EACCES). */
async function probeListen(listen: Config["listen"]): Promise<void> {
  const probe = createServer();
  await listenOn(probe, listen);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
