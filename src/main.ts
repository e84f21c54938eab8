#!/usr/bin/env node
/**
 * The `lmd` command: `lmd serve` runs the daemon; every other subcommand is a client (src/cli/).
 */
import { accessSync, constants, existsSync } from "node:fs";
import path from "node:path";
import closeWithGrace from "close-with-grace";
import { createApp, type App } from "./app.js";
import { reportBackend, runnerGpu } from "./backend.js";
import { ConfigError, loadConfig, unknownVariables, withAliases, type Config } from "./config.js";
import { controlSocketPath, listenControl, type ReloadAnswer, type ReloadRequest } from "./control.js";
import { createLogger, flushLogger, type Logger } from "./logger.js";
import { Notifier } from "./systemd.js";
import { serveArguments, serveHelp, usage } from "./usage.js";
import { VERSION } from "./version.js";

/** EX_CONFIG from sysexits.h: systemd and shells read it as "configuration error". */
const EX_CONFIG = 78;

async function serve(): Promise<void> {
  let config: Readonly<Config>;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`lmd: ${err.message}\n`);
      process.exit(EX_CONFIG);
    }
    throw err;
  }
  // `lmd serve 2>&1 | tee log`, then Ctrl+C: tee is gone before the daemon's last words. The
  // logger drops its lines after EPIPE; anything else on stderr (a Node warning) is dropped too.
  process.stderr.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
  });
  const log = createLogger({ level: config.logLevel, logDir: config.logDir });
  for (const u of unknownVariables(process.env)) log.warn({ variable: u.variable, suggestion: u.suggestion }, u.message);
  let notifyFailed = false;
  const notifier = Notifier.fromEnv(process.env, (message) => {
    if (!notifyFailed) log.error(message); // once: the watchdog would repeat it every few seconds
    notifyFailed = true;
  });
  notifier.startWatchdog(); // from the start: a start that hangs is caught too
  const app = await createApp(config, { log }).catch((err: unknown) => {
    if (!(err instanceof ConfigError)) return storeFailure(err, config);
    process.stderr.write(`lmd: ${err.message}\n`); // SERVICE_MODELS_CONFIG read at start
    process.exit(EX_CONFIG);
  });
  const status = () => statusLine(app.services.scheduler);
  let closeControl: (() => void) | undefined;
  // Unloading models after the drain can take a few seconds; give close-with-grace room for it.
  // SIGHUP always means reload (systemctl reload lmd runs `lmd reload`, which asks through the
  // control socket and waits for the outcome); it never stops the daemon.
  const reload = reloader(app, log, notifier, status);
  process.on("SIGHUP", () => void reload({ command: "reload" }));
  closeWithGrace({ delay: config.shutdownTimeoutMs + 20_000, skip: ["SIGHUP"], logger: { error: (m: string) => log.error(m) } }, async ({ signal, err }) => {
    notifier.stopping("shutting down: draining requests");
    closeControl?.();
    if (err) log.error({ err }, "fatal error; shutting down");
    else log.info({ signal }, "shutting down");
    await app.close();
    log.info("all models unloaded; exiting");
    await flushLogger(log);
  });
  const address = await app.listen().catch((err: unknown) => listenFailure(err, config) ?? storeFailure(err, config));
  log.info(
    { address: address.address, port: address.port, models: config.models, threads: config.threads ?? "auto", version: VERSION, ...ollamaAliases() },
    "lmd listening",
  );
  // Which backend the runners use, and why installed GPU binaries are not (warnings): after the
  // listener, so that a probe of the GPU never delays serving. A GPU backend that fails the probe's
  // smoke test is not given to the runners (see Scheduler.useGpu for a model preloaded meanwhile).
  void reportBackend(config.gpu, log)
    .then((r) => {
      const { gpu, refusal } = runnerGpu(config.gpu, r);
      app.services.scheduler.useGpu(gpu, refusal);
    })
    .catch((err: unknown) => log.warn({ err }, "could not tell which llama.cpp backend is used"));
  // The control socket lives in the unit's RuntimeDirectory= (systemd sets RUNTIME_DIRECTORY).
  if (process.env.RUNTIME_DIRECTORY) {
    closeControl = await listenControl(controlSocketPath(process.env), reload).catch((err: NodeJS.ErrnoException) => {
      log.error({ err: err.message }, "no control socket: systemctl reload cannot report its outcome (SIGHUP still reloads)");
      return undefined;
    });
  }
  // Ready once the policy's preloads are done (a failed one is logged at error and is no reason
  // to stay unready). Each preload may take up to the load timeout: systemd is told to wait.
  notifier.setStatus("loading the models the policy file preloads");
  await app.preload({ beforeEach: () => notifier.send(`EXTEND_TIMEOUT_USEC=${(config.loadTimeoutMs + 30_000) * 1000}`) });
  notifier.sendReady(status());
  setInterval(() => notifier.setStatus(status()), 1000).unref();
}

/** `2 models loaded, 3 requests running, 0 queued` (and the model being loaded), for `systemctl status`. */
function statusLine(scheduler: App["services"]["scheduler"]): string {
  const models = scheduler.list();
  const running = models.reduce((n, m) => n + m.active, 0);
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;
  const loading = scheduler.loadingModel ? `, loading ${scheduler.loadingModel}` : "";
  return `${plural(models.length, "model")} loaded, ${plural(running, "request")} running, ${scheduler.queueDepth} queued${loading}`;
}

/**
 * A reload: the log level (when the request names one) and the policy file, in force together or
 * not at all; RELOADING=1 … READY=1 around it for systemd. Reloads are serialised by the app.
 */
function reloader(app: App, log: Logger, notifier: Notifier, status: () => string): (request: ReloadRequest) => Promise<ReloadAnswer> {
  return async (request) => {
    const announced = notifier.ready;
    if (announced) notifier.reloading();
    try {
      const level = request.logLevel;
      if (level !== undefined && !Object.hasOwn(log.levels.values, level) && level !== "silent") {
        const error = `SERVICE_LOG_LEVEL '${level}' is not one of ${[...Object.keys(log.levels.values), "silent"].join(", ")}`;
        log.error({ err: error }, "configuration not reloaded; the configuration in force stays");
        return { ok: false, error };
      }
      const outcome = await app.reloadPolicy();
      if (!outcome.ok) return outcome;
      if (level !== undefined && level !== log.level) {
        log.info({ from: log.level, to: level }, "log level changed");
        log.level = level;
      }
      log.info("reloaded");
      return { ok: true };
    } finally {
      if (announced) notifier.sendReady(status());
    }
  };
}

/** Node's error codes for file system failures that mean "this directory cannot be the store". */
const STORE_ERRORS = new Set(["ENOTDIR", "EACCES", "EPERM", "EROFS", "ENOENT", "EEXIST", "ENOSPC", "ELOOP", "ENAMETOOLONG"]);

/** An unusable SERVICE_MODELS: one line on stderr naming the variable and the path, exit 78. */
function storeFailure(err: unknown, config: Readonly<Config>): never {
  let code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === undefined || !STORE_ERRORS.has(code)) throw err;
  // Node's recursive mkdir reports ENOENT on a read-only file system: ask the nearest existing directory why.
  if (code === "ENOENT") code = whyNotWritable(config.models) ?? code;
  const reason = `${DESCRIPTIONS[code] ?? code.toLowerCase()} (${code})`;
  const where = (err as NodeJS.ErrnoException).path;
  process.stderr.write(`lmd: cannot use the model store SERVICE_MODELS=${config.models}: ${reason}${where && where !== config.models ? ` at ${where}` : ""}\n`);
  process.exit(EX_CONFIG);
}

function whyNotWritable(dir: string): string | undefined {
  let at = path.resolve(dir);
  while (!existsSync(at) && path.dirname(at) !== at) at = path.dirname(at);
  try {
    accessSync(at, constants.W_OK);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
}

const DESCRIPTIONS: Record<string, string> = {
  ENOTDIR: "a part of the path is a file, not a directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOENT: "no such file or directory",
  EEXIST: "a file is in the way",
  ENOSPC: "no space left on the device",
  EADDRINUSE: "address already in use — is another server running? set SERVICE_HOST",
  EADDRNOTAVAIL: "no interface has this address — set SERVICE_HOST",
  EACCES_LISTEN: "permission denied (ports below 1024 need privileges) — set SERVICE_HOST",
  ENOTFOUND: "unknown host name — set SERVICE_HOST",
};

/**
 * A listen failure: one human line on stderr. A port in use exits 1, because it can pass (the other
 * server stops, systemd's Restart= tries again); an address this host cannot bind exits 78.
 */
function listenFailure(err: unknown, config: Readonly<Config>): undefined {
  const e = err as NodeJS.ErrnoException | undefined;
  if (e?.syscall !== "listen" && e?.syscall !== "getaddrinfo" && e?.code !== "EADDRINUSE") return undefined;
  const code = e.code ?? "";
  const host = config.listen.host.includes(":") ? `[${config.listen.host}]` : config.listen.host;
  const reason = DESCRIPTIONS[code === "EACCES" ? "EACCES_LISTEN" : code] ?? `${e.message} — set SERVICE_HOST`;
  process.stderr.write(`lmd: cannot listen on ${host}:${config.listen.port}: ${reason}\n`);
  process.exit(code === "EADDRINUSE" ? 1 : EX_CONFIG);
}

/** Which of Ollama's variables were read (as aliases of SERVICE_* ones), for the start log line. */
function ollamaAliases(): { aliases?: string[] } {
  const used = withAliases(process.env).used;
  return used.length > 0 ? { aliases: used } : {};
}

/**
 * Commands other than `serve` live in their own modules, loaded only when used, so the daemon
 * never loads the CLI and the CLI never loads the daemon. Each module exports `run(argv)`.
 */
const COMMANDS: Record<string, () => Promise<{ run(argv: string[]): Promise<void> }>> = {
  gateway: () => import("./gateway/main.js"),
  run: () => import("./cli/run.js"),
  pull: () => import("./cli/pull.js"),
  push: () => import("./cli/push.js"),
  create: () => import("./cli/create.js"),
  list: () => import("./cli/list.js"),
  ls: () => import("./cli/list.js"),
  ps: () => import("./cli/ps.js"),
  show: () => import("./cli/show.js"),
  cp: () => import("./cli/cp.js"),
  rm: () => import("./cli/rm.js"),
  stop: () => import("./cli/stop.js"),
  version: () => import("./cli/version.js"),
  reload: () => import("./cli/reload.js"),
  doctor: () => import("./cli/doctor.js"),
};

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === "serve") {
    const args = serveArguments(rest);
    if (args.action === "start") return serve();
    if (args.action === "help") return void process.stdout.write(serveHelp());
    process.stderr.write(`${args.message}\n`);
    process.exit(2);
  }
  // `lmd run demo hi | head -c 10`: a reader that goes away ends the command quietly, as any Unix tool.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(0);
    throw err;
  });
  const load = command === undefined ? undefined : COMMANDS[command];
  if (load) return (await load()).run(rest);
  switch (command) {
    case "version":
    case "--version":
    case "-v":
      process.stdout.write(`lmd version ${VERSION}\n`);
      return;
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(usage());
      return;
    default:
      process.stderr.write(`lmd: unknown command '${command}'\n\n${usage()}`);
      process.exit(2);
  }
}

await main(process.argv.slice(2));
