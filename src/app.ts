/**
 * `createApp(config, deps)`: builds the daemon (store, scheduler, routes, HTTP server) without
 * listening or touching process-wide state. `main.ts` and the tests both use it.
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import { createGuards } from "./http/guards.js";
import { Router } from "./http/router.js";
import { listenOn } from "./http/listen.js";
import { createHttpServer, type ServerLimits } from "./http/server.js";
import { ensureDemoModel } from "./models/demo.js";
import { ModelStore } from "./models/store.js";
import { generateRoutes } from "./routes/generate.js";
import { chatRoutes } from "./routes/chat.js";
import { embedRoutes } from "./routes/embed.js";
import { openaiRoutes } from "./routes/openai/index.js";
import { blobRoutes } from "./routes/blobs.js";
import { createRoutes } from "./routes/create.js";
import { modelRoutes } from "./routes/models.js";
import { pullRoutes } from "./routes/pull.js";
import { pushRoutes } from "./routes/push.js";
import { psRoutes } from "./routes/ps.js";
import { metricsRoutes } from "./routes/metrics.js";
import { Metrics } from "./metrics.js";
import { rootRoutes } from "./routes/root.js";
import type { Services } from "./routes/services.js";
import { Scheduler, type SchedulerOptions } from "./scheduler/scheduler.js";
import { VERSION } from "./version.js";

export interface AppDeps {
  log: Logger;
  /** Replaces how runners start (unit tests). */
  startRunner?: SchedulerOptions["startRunner"];
  /** Write the demo model into an empty store (default true). */
  demoModel?: boolean;
  /** Overrides of the HTTP server's limits (tests: short timeouts, a small connection cap). */
  httpLimits?: Partial<ServerLimits>;
}

export interface App {
  server: Server;
  services: Services;
  /** Listens where the configuration says; resolves with the bound address. */
  listen(): Promise<AddressInfo>;
  /** Graceful shutdown: refuse new work, drain within the timeout, unload every model, stop listening. */
  close(): Promise<void>;
}

export async function createApp(config: Readonly<Config>, deps: AppDeps): Promise<App> {
  const { log } = deps;
  const store = new ModelStore(config.models);
  await store.init();
  if (deps.demoModel !== false) await ensureDemoModel(store, log);
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
    loadTimeoutMs: config.loadTimeoutMs,
    ...(deps.startRunner ? { startRunner: deps.startRunner } : {}),
    onJobStats: metrics.onJobStats,
  });
  const services: Services = { config, store, scheduler, version: VERSION };
  const router = new Router();
  rootRoutes(router, services);
  generateRoutes(router, services);
  chatRoutes(router, services);
  embedRoutes(router, services);
  openaiRoutes(router, services);
  modelRoutes(router, services);
  blobRoutes(router, services);
  createRoutes(router, services);
  pullRoutes(router, services);
  pushRoutes(router, services);
  psRoutes(router, services);
  metricsRoutes(router, metrics);
  const http = createHttpServer({ router, guards: createGuards(config), log, maxBodyBytes: config.maxBodyBytes, onResponse: metrics.onResponse, ...(deps.httpLimits ? { limits: deps.httpLimits } : {}) });
  const { server } = http;

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      scheduler.stopAccepting(); // queued and new model requests → 503
      http.startDraining(); // every new request → 503 "server is shutting down"
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const drained = await Promise.race([scheduler.drain().then(() => true), delay(config.shutdownTimeoutMs).then(() => false)]);
      if (!drained) log.warn({ timeoutMs: config.shutdownTimeoutMs }, "shutdown timeout reached; stopping in-flight requests");
      await scheduler.unloadAll(); // runners dispose their models and exit
      server.closeAllConnections();
      await stopped;
    })());

  return {
    server,
    services,
    close,
    listen: () => listenOn(server, config.listen),
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
