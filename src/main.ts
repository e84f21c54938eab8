#!/usr/bin/env node
/**
 * The `lmd` command: `lmd serve` runs the daemon; every other subcommand is a client (src/cli/).
 */
import closeWithGrace from "close-with-grace";
import { createApp } from "./app.js";
import { ConfigError, loadConfig, type Config } from "./config.js";
import { createLogger, flushLogger } from "./logger.js";
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
  const log = createLogger({ level: config.logLevel, logDir: config.logDir });
  const app = await createApp(config, { log });
  // Unloading models after the drain can take a few seconds; give close-with-grace room for it.
  closeWithGrace({ delay: config.shutdownTimeoutMs + 20_000, logger: { error: (m: string) => log.error(m) } }, async ({ signal, err }) => {
    if (err) log.error({ err }, "fatal error; shutting down");
    else log.info({ signal }, "shutting down");
    await app.close();
    log.info("all models unloaded; exiting");
    await flushLogger(log);
  });
  const address = await app.listen();
  log.info({ address: address.address, port: address.port, models: config.models, threads: config.threads, version: VERSION }, "lmd listening");
}

function usage(): string {
  return `lmd ${VERSION} — local model-serving daemon

Usage:
  lmd serve        Start the daemon (configured by SERVICE_* environment variables)
  lmd gateway      Start the authenticating gateway (configured by GATEWAY_* variables)
  lmd run MODEL [PROMPT]   Run a model: one answer, or an interactive chat
  lmd pull MODEL           Pull a model from a registry
  lmd push MODEL           Push a model to a registry
  lmd create MODEL -f F    Create a model from a Modelfile
  lmd list, lmd ls         List models in the store
  lmd ps                   List running models
  lmd show MODEL           Show information for a model
  lmd cp SOURCE DEST       Copy a model
  lmd rm MODEL...          Remove models
  lmd stop MODEL           Unload a running model
  lmd version      Print the version (client, and server when one answers)
  lmd help         Show this help

Client commands reach the daemon at SERVICE_HOST (default 127.0.0.1:11434); each takes --help.
`;
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
};

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === "serve") return serve();
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
