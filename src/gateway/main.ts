/**
 * `lmd gateway`: runs the authenticating reverse proxy (configured by GATEWAY_* variables).
 * `lmd gateway keygen` prints a new random key and the `sha256:` line that allows it.
 *
 * Signals: SIGHUP re-reads the keys, JWKS and TLS files (key and certificate rotation without
 * dropping open streams); SIGTERM and SIGINT stop accepting, let open streams finish within
 * GATEWAY_SHUTDOWN_TIMEOUT, then exit. (close-with-grace is not used here because it treats
 * SIGHUP as a shutdown.)
 */
import { ConfigError } from "../config.js";
import { createLogger, flushLogger, type Logger } from "../logger.js";
import { Notifier } from "../systemd.js";
import { VERSION } from "../version.js";
import { columns } from "../usage.js";
import { GATEWAY_VARIABLES, loadGatewayConfig, type GatewayConfig } from "./config.js";
import { generateKey } from "./keys.js";
import { createGateway, type Gateway } from "./server.js";

/** EX_CONFIG from sysexits.h, as for `lmd serve`. */
const EX_CONFIG = 78;

const USAGE = `Usage:
  lmd gateway          Start the authenticating gateway (configured by GATEWAY_* variables)
  lmd gateway keygen   Print a new API key and the sha256: line that allows it in a keys file
`;

/** `lmd gateway --help`: the usage and every variable with its default and meaning. */
function help(): string {
  const rows = Object.entries(GATEWAY_VARIABLES).map(([name, v]): [string, string] => [
    name,
    `${v.meaning}${v.default === "" ? "" : ` (default ${v.default})`}`,
  ]);
  return `${USAGE}\nThe gateway takes no flags: it is configured by environment variables (docs/deployment.md).\n\nEnvironment variables:\n${columns(rows)}\n`;
}

/** Entry point of `lmd gateway`. */
export async function run(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(help());
    return;
  }
  if (sub === "keygen" && rest.length > 0) {
    process.stderr.write(`lmd gateway keygen: unexpected argument '${rest[0]}'\n\n${USAGE}`);
    process.exit(2);
  }
  if (sub === "keygen") {
    const { key, hashLine } = generateKey();
    process.stdout.write(`key:        ${key}\nkeys file:  ${hashLine}\n`);
    return;
  }
  if (sub === "help") {
    process.stdout.write(help());
    return;
  }
  if (sub !== undefined) {
    process.stderr.write(`lmd gateway: ${sub.startsWith("-") ? "unknown flag" : "unknown argument"} '${sub}'\n\n${USAGE}`);
    process.exit(2);
  }
  await serveGateway();
}

async function serveGateway(): Promise<void> {
  let config: Readonly<GatewayConfig>;
  let gateway: Gateway;
  const log = createLogger({ level: logLevel(), base: { component: "gateway" } });
  try {
    config = loadGatewayConfig(process.env);
    gateway = await createGateway(config, { log });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`lmd gateway: ${err.message}\n`);
      await flushLogger(log);
      process.exit(EX_CONFIG);
    }
    throw err;
  }
  // Under systemd (Type=notify): READY=1 once listening, RELOADING=1 … READY=1 around a reload,
  // STOPPING=1, and the watchdog from the event loop (src/systemd.ts).
  const notifier = Notifier.fromEnv(process.env, (message) => log.error(message));
  notifier.startWatchdog();
  handleSignals(gateway, log, config.shutdownTimeoutMs, notifier);
  const address = await gateway.listen();
  log.info(
    { address: address.address, port: address.port, upstream: config.upstream, tls: config.tls !== undefined, rateLimit: config.rateLimit, version: VERSION },
    "lmd gateway listening",
  );
  notifier.sendReady(`listening on port ${address.port}`);
}

function handleSignals(gateway: Gateway, log: Logger, shutdownTimeoutMs: number, notifier: Notifier): void {
  process.on("SIGHUP", () => {
    log.info("SIGHUP: reloading keys and certificates");
    const announced = notifier.ready;
    if (announced) notifier.reloading();
    void gateway.reload().finally(() => {
      if (announced) notifier.sendReady();
    });
  });
  const stop = (signal: NodeJS.Signals) => {
    notifier.stopping();
    log.info({ signal }, "shutting down");
    // close() itself ends stragglers after the timeout; this is the last resort.
    setTimeout(() => process.exit(1), shutdownTimeoutMs + 5_000).unref();
    void gateway.close().then(async () => {
      await flushLogger(log);
      process.exit(0);
    });
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  process.on("uncaughtException", (err) => {
    log.fatal({ err }, "fatal error; exiting");
    void flushLogger(log).then(() => process.exit(1));
  });
}

/** The log level before the configuration is checked (a bad level is reported by the check). */
function logLevel(): string {
  const level = process.env.GATEWAY_LOG_LEVEL?.trim();
  return level && ["fatal", "error", "warn", "info", "debug", "trace", "silent"].includes(level) ? level : "info";
}
