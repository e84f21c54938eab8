/**
 * Configuration: the only reader of environment variable names (CONTRACT §2).
 *
 * `loadConfig(env)` takes the environment as an argument so tests never touch `process.env`.
 * env-schema checks types and shapes; the values with a grammar of their own (listen address,
 * durations, sizes) are then parsed here, and every problem names its variable.
 */
import os from "node:os";
import { readFileSync } from "node:fs";
import path from "node:path";
import envSchema from "env-schema";
import { parseDuration, parseSize } from "./units.js";

/** A configuration problem: `main` prints it and exits 78 (EX_CONFIG). */
export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`invalid configuration: ${variable}: ${problem}`);
    this.name = "ConfigError";
  }
}

export type GpuMode = "auto" | "cuda" | "vulkan" | false;

export interface ListenAddress {
  /** Host to bind; `""` means all interfaces. IPv6 literals are stored without brackets. */
  host: string;
  port: number;
}

export interface Config {
  listen: ListenAddress;
  models: string;
  /** Default keep-alive in ms; negative = forever, 0 = unload after each request. */
  keepAliveMs: number;
  numParallel: number;
  /** 0 = auto (3 per GPU, 1 on CPU), resolved by the scheduler once the GPU is known. */
  maxLoadedModels: number;
  maxQueue: number;
  contextLength: number;
  origins: readonly string[];
  allowedHosts: readonly string[];
  maxBodyBytes: number;
  logLevel: string;
  logDir: string | undefined;
  shutdownTimeoutMs: number;
  loadTimeoutMs: number;
  threads: number;
  gpu: GpuMode;
}

/** Every variable with its default and meaning; docs/configuration.md and the env file are checked against it. */
export const VARIABLES = {
  SERVICE_HOST: { default: "127.0.0.1:11434", meaning: "listen address <host>:<port>; also host, :port, [::1]:port, ::1, http://host:port" },
  SERVICE_MODELS: { default: "", meaning: "model store (Ollama's layout); default ~/.lmd/models, /var/lib/lmd/models under systemd" },
  SERVICE_KEEP_ALIVE: { default: "5m", meaning: "how long an idle model stays loaded; duration or seconds; negative = forever, 0 = unload after each request" },
  SERVICE_NUM_PARALLEL: { default: "1", meaning: "parallel request slots per loaded model" },
  SERVICE_MAX_LOADED_MODELS: { default: "0", meaning: "models resident at once; 0 = auto (3 per GPU, 1 on CPU)" },
  SERVICE_MAX_QUEUE: { default: "512", meaning: "requests waiting for a slot; beyond it 503" },
  SERVICE_CONTEXT_LENGTH: { default: "4096", meaning: "default num_ctx, capped at the model's trained context" },
  SERVICE_ORIGINS: { default: "", meaning: "extra CORS origins, comma separated" },
  SERVICE_ALLOWED_HOSTS: { default: "", meaning: "extra Host header values accepted when bound to loopback" },
  SERVICE_MAX_BODY: { default: "8MiB", meaning: "largest JSON request body; larger 413" },
  SERVICE_LOG_LEVEL: { default: "info", meaning: "pino level: fatal, error, warn, info, debug, trace, silent" },
  SERVICE_LOG_DIR: { default: "", meaning: "directory for rotating log files; unset = stdout only" },
  SERVICE_SHUTDOWN_TIMEOUT: { default: "30s", meaning: "grace period for in-flight requests on SIGTERM" },
  SERVICE_LOAD_TIMEOUT: { default: "5m", meaning: "a model load making no progress this long is abandoned (500)" },
  SERVICE_THREADS: { default: "", meaning: "CPU threads for inference; unset = physical cores" },
  SERVICE_GPU: { default: "auto", meaning: "auto, cuda, vulkan or false" },
} as const;

export type VariableName = keyof typeof VARIABLES;

const DURATION = "^-?[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)?([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))*$";

const schema = {
  type: "object",
  properties: {
    SERVICE_HOST: { type: "string", default: VARIABLES.SERVICE_HOST.default },
    SERVICE_MODELS: { type: "string" },
    SERVICE_KEEP_ALIVE: { type: "string", pattern: DURATION, default: VARIABLES.SERVICE_KEEP_ALIVE.default },
    SERVICE_NUM_PARALLEL: { type: "integer", minimum: 1, maximum: 64, default: 1 },
    SERVICE_MAX_LOADED_MODELS: { type: "integer", minimum: 0, maximum: 64, default: 0 },
    SERVICE_MAX_QUEUE: { type: "integer", minimum: 0, maximum: 1_000_000, default: 512 },
    SERVICE_CONTEXT_LENGTH: { type: "integer", minimum: 1, maximum: 1_048_576, default: 4096 },
    SERVICE_ORIGINS: { type: "string", default: "" },
    SERVICE_ALLOWED_HOSTS: { type: "string", default: "" },
    SERVICE_MAX_BODY: { type: "string", default: VARIABLES.SERVICE_MAX_BODY.default },
    SERVICE_LOG_LEVEL: { type: "string", enum: ["fatal", "error", "warn", "info", "debug", "trace", "silent"], default: "info" },
    SERVICE_LOG_DIR: { type: "string" },
    SERVICE_SHUTDOWN_TIMEOUT: { type: "string", pattern: DURATION, default: VARIABLES.SERVICE_SHUTDOWN_TIMEOUT.default },
    SERVICE_LOAD_TIMEOUT: { type: "string", pattern: DURATION, default: VARIABLES.SERVICE_LOAD_TIMEOUT.default },
    SERVICE_THREADS: { type: "integer", minimum: 1, maximum: 1024 },
    SERVICE_GPU: { type: "string", enum: ["auto", "cuda", "vulkan", "false"], default: "auto" },
  },
} as const;

interface RawEnv {
  SERVICE_HOST: string;
  SERVICE_MODELS?: string;
  SERVICE_KEEP_ALIVE: string;
  SERVICE_NUM_PARALLEL: number;
  SERVICE_MAX_LOADED_MODELS: number;
  SERVICE_MAX_QUEUE: number;
  SERVICE_CONTEXT_LENGTH: number;
  SERVICE_ORIGINS: string;
  SERVICE_ALLOWED_HOSTS: string;
  SERVICE_MAX_BODY: string;
  SERVICE_LOG_LEVEL: string;
  SERVICE_LOG_DIR?: string;
  SERVICE_SHUTDOWN_TIMEOUT: string;
  SERVICE_LOAD_TIMEOUT: string;
  SERVICE_THREADS?: number;
  SERVICE_GPU: string;
}

/** Reads and checks the configuration from `env` (never from `process.env` directly). */
export function loadConfig(env: Record<string, string | undefined>): Readonly<Config> {
  // Empty strings mean "unset" (an env file line `SERVICE_THREADS=` must not be a type error).
  const data: Record<string, string> = {};
  for (const name of Object.keys(VARIABLES)) {
    const value = env[name];
    if (value !== undefined && value.trim() !== "") data[name] = value.trim();
  }
  let raw: RawEnv;
  try {
    raw = envSchema<RawEnv>({ schema, data, dotenv: false });
  } catch (err) {
    throw fromSchemaError(err);
  }
  return Object.freeze({
    listen: parseListenAddress(raw.SERVICE_HOST, "SERVICE_HOST"),
    models: raw.SERVICE_MODELS ?? defaultModelsDir(env),
    keepAliveMs: durationOf("SERVICE_KEEP_ALIVE", raw.SERVICE_KEEP_ALIVE),
    numParallel: raw.SERVICE_NUM_PARALLEL,
    maxLoadedModels: raw.SERVICE_MAX_LOADED_MODELS,
    maxQueue: raw.SERVICE_MAX_QUEUE,
    contextLength: raw.SERVICE_CONTEXT_LENGTH,
    origins: Object.freeze(splitList(raw.SERVICE_ORIGINS)),
    allowedHosts: Object.freeze(splitList(raw.SERVICE_ALLOWED_HOSTS).map((h) => h.toLowerCase())),
    maxBodyBytes: sizeOf("SERVICE_MAX_BODY", raw.SERVICE_MAX_BODY),
    logLevel: raw.SERVICE_LOG_LEVEL,
    logDir: raw.SERVICE_LOG_DIR,
    shutdownTimeoutMs: nonNegative("SERVICE_SHUTDOWN_TIMEOUT", durationOf("SERVICE_SHUTDOWN_TIMEOUT", raw.SERVICE_SHUTDOWN_TIMEOUT)),
    loadTimeoutMs: positive("SERVICE_LOAD_TIMEOUT", durationOf("SERVICE_LOAD_TIMEOUT", raw.SERVICE_LOAD_TIMEOUT)),
    threads: raw.SERVICE_THREADS ?? physicalCores(),
    gpu: raw.SERVICE_GPU === "false" ? false : (raw.SERVICE_GPU as GpuMode),
  });
}

/**
 * Parses a listen address in any form CONTRACT §2 accepts: `host:port`, `host`, `:port`,
 * `[v6]:port`, a bare IPv6 literal, and any of these behind `http://` or `https://`.
 */
export function parseListenAddress(value: string, variable = "SERVICE_HOST", defaultPort = 11434): ListenAddress {
  let rest = value.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(rest);
  if (scheme) {
    if (!/^https?$/i.test(scheme[1] ?? "")) throw new ConfigError(variable, `unsupported scheme '${scheme[1]}' in '${value}'`);
    rest = rest.slice(scheme[0].length).replace(/\/+$/, "");
  }
  if (rest.includes("/")) throw new ConfigError(variable, `'${value}' is not a <host>:<port> address`);
  let host: string;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(rest);
  if (bracketed) {
    host = bracketed[1] ?? "";
    portText = bracketed[2];
    if (!isIPv6(host)) throw new ConfigError(variable, `'${host}' is not an IPv6 address`);
  } else if ((rest.match(/:/g) ?? []).length > 1) {
    host = rest; // a bare IPv6 literal has no port
    if (!isIPv6(host)) throw new ConfigError(variable, `'${value}' is not a valid address`);
  } else {
    const i = rest.indexOf(":");
    host = i < 0 ? rest : rest.slice(0, i);
    portText = i < 0 ? undefined : rest.slice(i + 1);
    if (host !== "" && !/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/i.test(host)) throw new ConfigError(variable, `'${host}' is not a valid host name`);
  }
  let port = defaultPort;
  if (portText !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535) throw new ConfigError(variable, `port '${portText}' must be an integer between 0 and 65535`);
    port = Number(portText);
  }
  return { host: host.toLowerCase(), port };
}

/** True when `host` names the loopback interface (the DNS-rebinding guards apply only then). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || /^127(\.[0-9]{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}

/** The address a client should connect to for a listen address (0.0.0.0 → 127.0.0.1, :: → ::1). */
export function clientUrl(listen: ListenAddress): string {
  let host = listen.host;
  if (host === "" || host === "0.0.0.0") host = "127.0.0.1";
  if (host === "::") host = "::1";
  return `http://${host.includes(":") ? `[${host}]` : host}:${listen.port}`;
}

function isIPv6(host: string): boolean {
  return /^[0-9a-f:.]+$/i.test(host) && host.includes(":") && host.split("::").length <= 2;
}

function splitList(value: string): string[] {
  return value.split(",").map((s) => s.trim()).filter((s) => s !== "");
}

function durationOf(variable: string, value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) throw new ConfigError(variable, `'${value}' is not a duration (examples: 30s, 5m, 1h, 300)`);
  return ms;
}

function sizeOf(variable: string, value: string): number {
  const bytes = parseSize(value);
  if (bytes === undefined || bytes < 1) throw new ConfigError(variable, `'${value}' is not a size (examples: 8MiB, 1048576)`);
  return bytes;
}

function nonNegative(variable: string, ms: number): number {
  if (ms < 0) throw new ConfigError(variable, "must not be negative");
  return ms;
}

function positive(variable: string, ms: number): number {
  if (ms <= 0) throw new ConfigError(variable, "must be positive");
  return ms;
}

function defaultModelsDir(env: Record<string, string | undefined>): string {
  // systemd's StateDirectory= sets STATE_DIRECTORY; elsewhere the store lives in the user's home.
  const stateDir = env.STATE_DIRECTORY?.split(":")[0];
  if (stateDir) return path.join(stateDir, "models");
  return path.join(env.HOME ?? os.homedir(), ".lmd", "models");
}

/** Physical cores: unique (package, core) pairs in /proc/cpuinfo, else the logical count. */
export function physicalCores(): number {
  try {
    const pairs = new Set<string>();
    let physical = "0";
    for (const line of readFileSync("/proc/cpuinfo", "utf8").split("\n")) {
      const [key, val] = line.split(":").map((s) => s.trim());
      if (key === "physical id") physical = val ?? "0";
      if (key === "core id") pairs.add(`${physical}/${val}`);
    }
    if (pairs.size > 0) return pairs.size;
  } catch {
    // not Linux, or /proc hidden: fall through
  }
  return Math.max(1, os.availableParallelism());
}

function fromSchemaError(err: unknown): ConfigError {
  // env-schema's ajv messages look like "env/SERVICE_NUM_PARALLEL must be integer".
  const message = err instanceof Error ? err.message : String(err);
  const first = message.split(",")[0] ?? message;
  const m = /env\/(\w+) (.*)/.exec(first);
  if (m) return new ConfigError(m[1] ?? "environment", m[2] ?? "is invalid");
  return new ConfigError("environment", first);
}
