/**
 * Configuration: the only reader of environment variable names (CONTRACT §2).
 *
 * `loadConfig(env)` takes the environment as an argument so tests never touch `process.env`.
 * env-schema checks types and shapes; the values with a grammar of their own (listen address,
 * durations, sizes) are then parsed here, and every problem names its variable.
 */
import os from "node:os";
import path from "node:path";
import envSchema from "env-schema";
import { MAX_TIMER_MS, parseDuration, parseSize } from "./units.js";

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
  /** A streaming response whose client takes nothing for this long is ended (issue 13 item 8). */
  writeTimeoutMs: number;
  /** A runner whose chat template has not rendered a request's prompt after this long is restarted (issue 13 item 15). */
  renderTimeoutMs: number;
  /** undefined = chosen per load from the free cores (src/cpu.ts). */
  threads: number | undefined;
  gpu: GpuMode;
  /** VRAM kept free on each GPU (bytes): the memory check and node-llama-cpp's layer choice leave it unused. */
  gpuOverheadBytes: number;
  /** Per-model policy file (YAML or JSON); read by the app at start and on SIGHUP. */
  modelsConfig: string | undefined;
  /** Default of a request's `truncate`: drop the oldest turns of a prompt over the context (else 400). */
  truncate: boolean;
  /** Cap on generated tokens per request; 0 = 4 × the request's context length. */
  maxPredict: number;
  /** How long a stream's output after its first token is gathered in its runner before it is written; 0 = each token at once. */
  streamIntervalMs: number;
  /** The KV cache's element type for every model the policy file does not say otherwise for. */
  kvCacheType: KvCacheType;
  /** Flash attention: "auto", on or off; a quantized KV cache turns "auto" on. */
  flashAttention: FlashAttention;
  /** Saved prompt prefixes: their directory, its cap in bytes (0 = none saved), and the shortest saved. */
  cacheDir: string;
  cacheMaxBytes: number;
  cacheMinTokens: number;
  /** Where pulls and pushes find credentials and trust, and which mirrors pulls try first. */
  registry: RegistryConfig;
  /** Bytes of blobs no manifest references (uploads awaiting a create) the store holds at most: more → 507. */
  maxUnreferencedBlobBytes: number;
}

export interface RegistryConfig {
  /** Docker's config.json (`auths`); a missing file means no credentials. */
  authFile: string;
  /** PEM file of extra CA certificates. */
  caFile: string | undefined;
  /**
   * Node's NODE_EXTRA_CA_CERTS, which Node adds to its default store: a secure context with
   * caFile's certificates is built from a copy of the store that lacks them, so they are added
   * again there.
   */
  nodeExtraCaFile: string | undefined;
  /** Registry host (`host[:port]`, lower case) → mirror origins (`scheme://host[:port]`), tried in order. */
  mirrors: ReadonlyMap<string, readonly string[]>;
}

export type KvCacheType = "f16" | "q8_0" | "q4_0";
export type FlashAttention = "auto" | boolean;

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
  SERVICE_WRITE_TIMEOUT: { default: "30s", meaning: "a streaming response whose client reads nothing this long is ended, freeing its slot" },
  SERVICE_RENDER_TIMEOUT: { default: "10s", meaning: "a model's own (Jinja) chat template that has not rendered a request's prompt this long: its runner is restarted and the request answered 400" },
  SERVICE_THREADS: { default: "", meaning: "CPU threads for inference; unset = the physical cores free when a model loads, then as the load changes" },
  SERVICE_GPU: { default: "auto", meaning: "auto, cuda, vulkan or false" },
  SERVICE_GPU_OVERHEAD: { default: "0", meaning: "VRAM kept free on each GPU, a size or bytes (room for other programs); models offload fewer layers or are refused instead" },
  SERVICE_MAX_PREDICT: { default: "0", meaning: "server-side cap on generated tokens per request; 0 = 4 x the request's context length; num_predict below it still wins" },
  SERVICE_MODELS_CONFIG: { default: "", meaning: "per-model policy file (YAML or JSON): num_parallel, num_ctx, keep_alive, pinned, preload, options; re-read on SIGHUP" },
  SERVICE_STREAM_INTERVAL: { default: "10ms", meaning: "how long a stream's tokens after its first are gathered before they are written: fewer writes and wake-ups per token; 0 = each token at once; at most 1s" },
  SERVICE_KV_CACHE_TYPE: { default: "f16", meaning: "element type of the KV cache: f16, q8_0 (about half the memory) or q4_0 (about a quarter); a quantized cache needs flash attention" },
  SERVICE_FLASH_ATTENTION: { default: "auto", meaning: "flash attention: auto (on where the model and backend support it), or a boolean; q8_0 and q4_0 caches turn auto on" },
  SERVICE_CACHE_DIR: { default: "", meaning: "directory of saved prompt prefixes (evaluated states restored after a restart, unload or eviction); default: cache beside the model store" },
  SERVICE_CACHE_MAX: { default: "8GiB", meaning: "cap on the saved prompt prefixes, least recently used removed first; 0 = none saved" },
  SERVICE_CACHE_MIN_TOKENS: { default: "1024", meaning: "a slot holding fewer tokens is not saved when its model unloads" },
  SERVICE_TRUNCATE: { default: "true", meaning: "default of truncate on /api/generate, /api/chat and /v1: true drops the oldest turns of a prompt longer than the context, false answers 400 (1/0/true/false/yes/no/on/off)" },
  SERVICE_REGISTRY_AUTH: { default: "~/.docker/config.json", meaning: "registry credentials in Docker's config.json format (the auths entries docker login writes); read at each pull and push; mode 0600" },
  SERVICE_REGISTRY_CA: { default: "", meaning: "PEM file of CA certificates trusted for registries and mirrors, besides the system's" },
  SERVICE_REGISTRY_MIRRORS: { default: "", meaning: "pull-through mirrors, comma separated <registry host>=<mirror URL> (registry.ollama.ai=https://mirror.lan:5000): pulls try the mirror first, then the registry" },
  SERVICE_MAX_UNREFERENCED_BLOBS: { default: "64GiB", meaning: "bytes of uploaded blobs no model references yet (/api/blobs before /api/create) the store holds at most; an upload past it 507; such blobs are removed an hour after their upload" },
} as const;

export type VariableName = keyof typeof VARIABLES;

const schema = {
  type: "object",
  properties: {
    SERVICE_HOST: { type: "string", default: VARIABLES.SERVICE_HOST.default },
    SERVICE_MODELS: { type: "string" },
    SERVICE_KEEP_ALIVE: { type: "string", default: VARIABLES.SERVICE_KEEP_ALIVE.default },
    SERVICE_NUM_PARALLEL: { type: "integer", minimum: 1, maximum: 64, default: 1 },
    SERVICE_MAX_LOADED_MODELS: { type: "integer", minimum: 0, maximum: 64, default: 0 },
    SERVICE_MAX_QUEUE: { type: "integer", minimum: 0, maximum: 1_000_000, default: 512 },
    SERVICE_CONTEXT_LENGTH: { type: "integer", minimum: 1, maximum: 1_048_576, default: 4096 },
    SERVICE_ORIGINS: { type: "string", default: "" },
    SERVICE_ALLOWED_HOSTS: { type: "string", default: "" },
    SERVICE_MAX_BODY: { type: "string", default: VARIABLES.SERVICE_MAX_BODY.default },
    SERVICE_LOG_LEVEL: { type: "string", enum: ["fatal", "error", "warn", "info", "debug", "trace", "silent"], default: "info" },
    SERVICE_LOG_DIR: { type: "string" },
    SERVICE_SHUTDOWN_TIMEOUT: { type: "string", default: VARIABLES.SERVICE_SHUTDOWN_TIMEOUT.default },
    SERVICE_LOAD_TIMEOUT: { type: "string", default: VARIABLES.SERVICE_LOAD_TIMEOUT.default },
    SERVICE_WRITE_TIMEOUT: { type: "string", default: VARIABLES.SERVICE_WRITE_TIMEOUT.default },
    SERVICE_RENDER_TIMEOUT: { type: "string", default: VARIABLES.SERVICE_RENDER_TIMEOUT.default },
    SERVICE_THREADS: { type: "integer", minimum: 1, maximum: 1024 },
    SERVICE_GPU: { type: "string", enum: ["auto", "cuda", "vulkan", "false"], default: "auto" },
    SERVICE_GPU_OVERHEAD: { type: "string", default: "0" },
    SERVICE_MAX_PREDICT: { type: "integer", minimum: 0, maximum: 100_000_000, default: 0 },
    SERVICE_MODELS_CONFIG: { type: "string" },
    SERVICE_STREAM_INTERVAL: { type: "string", default: VARIABLES.SERVICE_STREAM_INTERVAL.default },
    SERVICE_TRUNCATE: { type: "string", default: "true" },
    SERVICE_CACHE_DIR: { type: "string" },
    SERVICE_CACHE_MAX: { type: "string", default: VARIABLES.SERVICE_CACHE_MAX.default },
    SERVICE_CACHE_MIN_TOKENS: { type: "integer", minimum: 1, maximum: 10_000_000, default: 1024 },
    SERVICE_KV_CACHE_TYPE: { type: "string", enum: ["f16", "q8_0", "q4_0"], default: "f16" },
    SERVICE_FLASH_ATTENTION: { type: "string", default: "auto" },
    SERVICE_REGISTRY_AUTH: { type: "string", default: VARIABLES.SERVICE_REGISTRY_AUTH.default },
    SERVICE_REGISTRY_CA: { type: "string" },
    SERVICE_REGISTRY_MIRRORS: { type: "string", default: "" },
    SERVICE_MAX_UNREFERENCED_BLOBS: { type: "string", default: VARIABLES.SERVICE_MAX_UNREFERENCED_BLOBS.default },
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
  SERVICE_WRITE_TIMEOUT: string;
  SERVICE_RENDER_TIMEOUT: string;
  SERVICE_THREADS?: number;
  SERVICE_GPU: string;
  SERVICE_GPU_OVERHEAD: string;
  SERVICE_MAX_PREDICT: number;
  SERVICE_MODELS_CONFIG?: string;
  SERVICE_STREAM_INTERVAL: string;
  SERVICE_TRUNCATE: string;
  SERVICE_KV_CACHE_TYPE: string;
  SERVICE_FLASH_ATTENTION: string;
  SERVICE_CACHE_DIR?: string;
  SERVICE_CACHE_MAX: string;
  SERVICE_CACHE_MIN_TOKENS: number;
  SERVICE_REGISTRY_AUTH: string;
  SERVICE_REGISTRY_CA?: string;
  SERVICE_REGISTRY_MIRRORS: string;
  SERVICE_MAX_UNREFERENCED_BLOBS: string;
}

/** Reads and checks the configuration from `env` (never from `process.env` directly). */
export function loadConfig(given: Record<string, string | undefined>): Readonly<Config> {
  const env = withAliases(given).env;
  // Empty strings mean "unset" (an env file line `SERVICE_THREADS=` must not be a type error).
  const data: Record<string, string> = {};
  for (const name of Object.keys(VARIABLES)) {
    const value = env[name];
    if (value !== undefined && value.trim() !== "") data[name] = value.trim();
  }
  if (data.SERVICE_KV_CACHE_TYPE !== undefined) data.SERVICE_KV_CACHE_TYPE = data.SERVICE_KV_CACHE_TYPE.toLowerCase();
  // SERVICE_GPU is also a boolean: `0`, `no`, `off` mean CPU only, `1`, `yes`, `on` mean auto.
  if (data.SERVICE_GPU !== undefined && parseBoolean(data.SERVICE_GPU) !== undefined) data.SERVICE_GPU = parseBoolean(data.SERVICE_GPU) ? "auto" : "false";
  let raw: RawEnv;
  try {
    // env: false — only `env` (the argument) is read; env-schema would otherwise merge process.env
    // back in, empty values included.
    raw = envSchema<RawEnv>({ schema, data, env: false, dotenv: false });
  } catch (err) {
    throw fromSchemaError(err, data);
  }
  const models = raw.SERVICE_MODELS === undefined ? defaultModelsDir(env) : expandHome(raw.SERVICE_MODELS, env);
  return Object.freeze({
    listen: parseListenAddress(raw.SERVICE_HOST, "SERVICE_HOST"),
    models,
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
    shutdownTimeoutMs: timerDuration("SERVICE_SHUTDOWN_TIMEOUT", nonNegative("SERVICE_SHUTDOWN_TIMEOUT", durationOf("SERVICE_SHUTDOWN_TIMEOUT", raw.SERVICE_SHUTDOWN_TIMEOUT))),
    loadTimeoutMs: timerDuration("SERVICE_LOAD_TIMEOUT", positive("SERVICE_LOAD_TIMEOUT", durationOf("SERVICE_LOAD_TIMEOUT", raw.SERVICE_LOAD_TIMEOUT))),
    writeTimeoutMs: timerDuration("SERVICE_WRITE_TIMEOUT", positive("SERVICE_WRITE_TIMEOUT", durationOf("SERVICE_WRITE_TIMEOUT", raw.SERVICE_WRITE_TIMEOUT))),
    renderTimeoutMs: timerDuration("SERVICE_RENDER_TIMEOUT", positive("SERVICE_RENDER_TIMEOUT", durationOf("SERVICE_RENDER_TIMEOUT", raw.SERVICE_RENDER_TIMEOUT))),
    threads: raw.SERVICE_THREADS,
    gpu: raw.SERVICE_GPU === "false" ? false : (raw.SERVICE_GPU as GpuMode),
    gpuOverheadBytes: sizeOrZero("SERVICE_GPU_OVERHEAD", raw.SERVICE_GPU_OVERHEAD),
    modelsConfig: raw.SERVICE_MODELS_CONFIG,
    truncate: booleanOf("SERVICE_TRUNCATE", raw.SERVICE_TRUNCATE),
    maxPredict: raw.SERVICE_MAX_PREDICT,
    streamIntervalMs: atMost("SERVICE_STREAM_INTERVAL", 1000, "1s", nonNegative("SERVICE_STREAM_INTERVAL", durationOf("SERVICE_STREAM_INTERVAL", raw.SERVICE_STREAM_INTERVAL))),
    ...cacheSettings(raw),
    cacheDir: raw.SERVICE_CACHE_DIR === undefined ? path.join(path.dirname(models), "cache") : expandHome(raw.SERVICE_CACHE_DIR, env),
    cacheMaxBytes: raw.SERVICE_CACHE_MAX.trim() === "0" ? 0 : sizeOf("SERVICE_CACHE_MAX", raw.SERVICE_CACHE_MAX),
    cacheMinTokens: raw.SERVICE_CACHE_MIN_TOKENS,
    registry: Object.freeze({
      authFile: expandHome(raw.SERVICE_REGISTRY_AUTH, env),
      caFile: raw.SERVICE_REGISTRY_CA === undefined ? undefined : expandHome(raw.SERVICE_REGISTRY_CA, env),
      nodeExtraCaFile: env.NODE_EXTRA_CA_CERTS?.trim() || undefined,
      mirrors: parseMirrors(raw.SERVICE_REGISTRY_MIRRORS, "SERVICE_REGISTRY_MIRRORS"),
    }),
    maxUnreferencedBlobBytes: sizeOf("SERVICE_MAX_UNREFERENCED_BLOBS", raw.SERVICE_MAX_UNREFERENCED_BLOBS),
  });
}

/** The KV cache's type and flash attention; a quantized cache with flash attention off cannot load. */
function cacheSettings(raw: RawEnv): { kvCacheType: KvCacheType; flashAttention: FlashAttention } {
  const kvCacheType = raw.SERVICE_KV_CACHE_TYPE as KvCacheType;
  const fa = raw.SERVICE_FLASH_ATTENTION.toLowerCase();
  const flashAttention: FlashAttention = fa === "auto" ? "auto" : booleanOf("SERVICE_FLASH_ATTENTION", fa);
  return resolveCacheSettings(kvCacheType, flashAttention, (problem) => new ConfigError("SERVICE_FLASH_ATTENTION", problem));
}

/**
 * llama.cpp quantizes the V cache only with flash attention: a quantized type turns "auto" on, and
 * an explicit off is refused (`fail` makes the error of whoever asked: the environment or the policy file).
 */
export function resolveCacheSettings(kvCacheType: KvCacheType, flashAttention: FlashAttention, fail: (problem: string) => Error): { kvCacheType: KvCacheType; flashAttention: FlashAttention } {
  if (kvCacheType === "f16") return { kvCacheType, flashAttention };
  if (flashAttention === false) throw fail(`a ${kvCacheType} KV cache needs flash attention; turn it on (or auto) or use f16`);
  return { kvCacheType, flashAttention: true };
}

// --- Ollama's variable names, booleans, `~` (issue 14) -------------------------------------------

/**
 * Ollama's variables, read when the variable of record is unset, so that an Ollama user's
 * environment, scripts and systemd drop-ins keep working. A variable added later needs only a line
 * here; `value` maps a value whose meaning differs (OLLAMA_DEBUG is a boolean, not a level).
 */
export const ALIASES: Readonly<Record<string, { variable: string; value?: (v: string) => string | undefined; note?: string }>> = {
  OLLAMA_HOST: { variable: "SERVICE_HOST" },
  OLLAMA_MODELS: { variable: "SERVICE_MODELS" },
  OLLAMA_KEEP_ALIVE: { variable: "SERVICE_KEEP_ALIVE" },
  OLLAMA_NUM_PARALLEL: { variable: "SERVICE_NUM_PARALLEL" },
  OLLAMA_MAX_LOADED_MODELS: { variable: "SERVICE_MAX_LOADED_MODELS" },
  OLLAMA_MAX_QUEUE: { variable: "SERVICE_MAX_QUEUE" },
  OLLAMA_CONTEXT_LENGTH: { variable: "SERVICE_CONTEXT_LENGTH" },
  OLLAMA_ORIGINS: { variable: "SERVICE_ORIGINS" },
  OLLAMA_LOAD_TIMEOUT: { variable: "SERVICE_LOAD_TIMEOUT" },
  OLLAMA_KV_CACHE_TYPE: { variable: "SERVICE_KV_CACHE_TYPE" },
  OLLAMA_FLASH_ATTENTION: { variable: "SERVICE_FLASH_ATTENTION" },
  OLLAMA_GPU_OVERHEAD: { variable: "SERVICE_GPU_OVERHEAD" },
  // Ollama reads OLLAMA_DEBUG=1 (or 2 for trace) as "more logging".
  OLLAMA_DEBUG: { variable: "SERVICE_LOG_LEVEL", note: "1 = debug, 2 = trace", value: (v) => (v.trim() === "2" ? "trace" : parseBoolean(v) === true ? "debug" : undefined) },
};

/**
 * The environment with each alias copied to its variable of record where that one is unset or
 * empty; `used` lists the aliases that took effect (the start log line names them).
 */
export function withAliases(env: Record<string, string | undefined>): { env: Record<string, string | undefined>; used: string[] } {
  const out = { ...env };
  const used: string[] = [];
  for (const [alias, { variable, value }] of Object.entries(ALIASES)) {
    const given = env[alias];
    if (given === undefined || given.trim() === "" || (env[variable] ?? "").trim() !== "") continue;
    const mapped = value ? value(given) : given;
    if (mapped === undefined) continue;
    out[variable] = mapped;
    used.push(alias);
  }
  return { env: out, used };
}

/** Names read outside the daemon's configuration (the CLI's), which must not be reported as unknown. */
const OTHER_NAMES = ["OLLAMA_NOHISTORY"];

/** A variable in the environment that lmd does not read but that looks meant for it. */
export interface UnknownVariable {
  variable: string;
  /** The known name nearest to it, when it is close enough to be a misspelling. */
  suggestion?: string;
  message: string;
}

/**
 * The SERVICE_* and OLLAMA_* names (any case) in `env` that lmd does not read, each with the
 * nearest known name when it is within three edits of it (a likely misspelling). A misspelled
 * variable would otherwise be ignored without a word, and its default used.
 */
export function unknownVariables(env: Record<string, string | undefined>): UnknownVariable[] {
  const known = [...Object.keys(VARIABLES), ...Object.keys(ALIASES), ...OTHER_NAMES];
  const out: UnknownVariable[] = [];
  for (const name of Object.keys(env).sort()) {
    if (known.includes(name) || !/^(SERVICE|OLLAMA)_/i.test(name)) continue;
    let best: string | undefined;
    let bestDistance = Infinity;
    for (const k of known) {
      const d = editDistance(name.toUpperCase(), k);
      if (d < bestDistance) [best, bestDistance] = [k, d];
    }
    const suggestion = bestDistance <= 3 ? best : undefined;
    const message = suggestion
      ? `unknown variable ${name} is ignored; did you mean ${suggestion}?`
      : `unknown variable ${name} is ignored (docs/configuration.md lists the variables lmd reads)`;
    out.push({ variable: name, ...(suggestion ? { suggestion } : {}), message });
  }
  return out;
}

/** Levenshtein distance (insertions, deletions, substitutions), one row at a time. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** Booleans as systemd and Ollama read them: 1/0, true/false, yes/no, on/off, any case; else undefined. */
export function parseBoolean(value: string): boolean | undefined {
  const v = value.trim().toLowerCase();
  if (["1", "true", "yes", "on", "y", "t"].includes(v)) return true;
  if (["0", "false", "no", "off", "n", "f"].includes(v)) return false;
  return undefined;
}

/** `~` and `~/...` mean the home directory, as a shell would (env files and quoted values skip the shell). */
function expandHome(dir: string, env: Record<string, string | undefined>): string {
  if (dir === "~") return env.HOME ?? os.homedir();
  if (dir.startsWith("~/")) return path.join(env.HOME ?? os.homedir(), dir.slice(2));
  return dir;
}

/** A boolean variable: 1/0, true/false, yes/no, on/off, any case. */
function booleanOf(variable: string, value: string): boolean {
  const v = value.toLowerCase();
  if (["1", "true", "yes", "on"].includes(v)) return true;
  if (["0", "false", "no", "off"].includes(v)) return false;
  throw new ConfigError(variable, `'${value}' is not a boolean (1/0, true/false, yes/no, on/off)`);
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

/**
 * `registry.ollama.ai=https://mirror.lan:5000,hf.co=http://10.0.0.5:5000`: each registry host's
 * mirrors in the order given (a host may be named more than once). A mirror is an origin: the
 * distribution API lives at its `/v2/`, so a path is refused.
 */
export function parseMirrors(value: string, variable: string): ReadonlyMap<string, readonly string[]> {
  const out = new Map<string, string[]>();
  for (const entry of splitList(value)) {
    const eq = entry.indexOf("=");
    const host = eq < 0 ? "" : entry.slice(0, eq).trim().toLowerCase();
    const target = eq < 0 ? "" : entry.slice(eq + 1).trim();
    if (!/^[a-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9a-f:.]+\](:[0-9]{1,5})?$/.test(host) || target === "") {
      throw new ConfigError(variable, `'${entry}' is not <registry host>=<mirror URL>`);
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new ConfigError(variable, `'${target}' is not a URL (example: https://mirror.lan:5000)`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new ConfigError(variable, `'${target}': a mirror is an http:// or https:// URL`);
    if (url.pathname !== "/" || url.search || url.hash || url.username || url.password) {
      throw new ConfigError(variable, `'${target}': a mirror is named by its origin only (scheme://host:port), without path or credentials`);
    }
    out.set(host, [...(out.get(host) ?? []), url.origin]);
  }
  return out;
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

/** A size that may be 0 (Ollama's OLLAMA_GPU_OVERHEAD is a byte count, 0 by default). */
function sizeOrZero(variable: string, value: string): number {
  const bytes = parseSize(value);
  if (bytes === undefined) throw new ConfigError(variable, `'${value}' is not a size (examples: 1GiB, 536870912, 0)`);
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

function atMost(variable: string, limitMs: number, limit: string, ms: number): number {
  if (ms > limitMs) throw new ConfigError(variable, `must be at most ${limit}`);
  return ms;
}

/** A timeout a Node timer can hold: longer ones would fire at once instead of never. */
function timerDuration(variable: string, ms: number): number {
  if (ms > MAX_TIMER_MS) throw new ConfigError(variable, "must be at most 24 days (596h)");
  return ms;
}

function defaultModelsDir(env: Record<string, string | undefined>): string {
  // systemd's StateDirectory= sets STATE_DIRECTORY; elsewhere the store lives in the user's home.
  const stateDir = env.STATE_DIRECTORY?.split(":")[0];
  if (stateDir) return path.join(stateDir, "models");
  return path.join(env.HOME ?? os.homedir(), ".lmd", "models");
}

function fromSchemaError(err: unknown, data: Record<string, string>): ConfigError {
  // env-schema throws ajv's errors (e.g. instancePath "/SERVICE_GPU", keyword "enum"); each becomes
  // a sentence that quotes the value and says what is accepted.
  const first = (err as { errors?: SchemaProblem[] } | null)?.errors?.[0];
  const variable = first?.instancePath?.replace(/^\//, "");
  if (!first || !variable) return new ConfigError("environment", err instanceof Error ? err.message : String(err));
  const value = `'${data[variable] ?? ""}'`;
  const p = first.params ?? {};
  switch (first.keyword) {
    case "enum":
      return new ConfigError(variable, `${value} is not one of ${(p.allowedValues ?? []).join(", ")}`);
    case "type":
      return new ConfigError(variable, `${value} is not ${p.type === "integer" ? "an integer" : `a ${String(p.type)}`}`);
    case "minimum":
      return new ConfigError(variable, `${value} is too small: must be at least ${String(p.limit)}`);
    case "maximum":
      return new ConfigError(variable, `${value} is too large: must be at most ${String(p.limit)}`);
    default:
      return new ConfigError(variable, `${value} ${first.message ?? "is invalid"}`);
  }
}

interface SchemaProblem {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: { allowedValues?: unknown[]; type?: string; limit?: number };
}
