/**
 * Configuration: the only reader of environment variable names.
 *
 * `loadConfig(env)` takes the environment as an argument so tests never touch `process.env`.
 * env-schema checks types and shapes (config/schema.ts); the values with a grammar of their own
 * (listen address, durations, sizes) are then parsed (config/values.ts, config/address.ts), and
 * every problem names its variable. This module is the door: the rest of lmd imports from here.
 */
import os from "node:os";
import path from "node:path";
import envSchema from "env-schema";
import { parseListenAddress, type ListenAddress } from "./config/address.js";
import { fromSchemaError, schema, type RawEnv } from "./config/schema.js";
import {
  atMost,
  booleanOf,
  ConfigError,
  durationOf,
  expandHome,
  nonNegative,
  parseBoolean,
  parseMirrors,
  positive,
  sizeOf,
  sizeOrZero,
  splitList,
  timerDuration,
} from "./config/values.js";
import { VARIABLES, withAliases } from "./config/variables.js";

export { clientUrl, isLoopbackHost, parseListenAddress, type ListenAddress } from "./config/address.js";
export { ConfigError, parseBoolean, parseMirrors } from "./config/values.js";
export { ALIASES, unknownVariables, VARIABLES, withAliases, type UnknownVariable, type VariableName } from "./config/variables.js";

export type GpuMode = "auto" | "cuda" | "vulkan" | false;

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
  /** A streaming response whose client takes nothing for this long is ended. */
  writeTimeoutMs: number;
  /** A runner whose chat template has not rendered a request's prompt after this long is restarted. */
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
    shutdownTimeoutMs: timerDuration(
      "SERVICE_SHUTDOWN_TIMEOUT",
      nonNegative("SERVICE_SHUTDOWN_TIMEOUT", durationOf("SERVICE_SHUTDOWN_TIMEOUT", raw.SERVICE_SHUTDOWN_TIMEOUT)),
    ),
    loadTimeoutMs: timerDuration("SERVICE_LOAD_TIMEOUT", positive("SERVICE_LOAD_TIMEOUT", durationOf("SERVICE_LOAD_TIMEOUT", raw.SERVICE_LOAD_TIMEOUT))),
    writeTimeoutMs: timerDuration("SERVICE_WRITE_TIMEOUT", positive("SERVICE_WRITE_TIMEOUT", durationOf("SERVICE_WRITE_TIMEOUT", raw.SERVICE_WRITE_TIMEOUT))),
    renderTimeoutMs: timerDuration(
      "SERVICE_RENDER_TIMEOUT",
      positive("SERVICE_RENDER_TIMEOUT", durationOf("SERVICE_RENDER_TIMEOUT", raw.SERVICE_RENDER_TIMEOUT)),
    ),
    threads: raw.SERVICE_THREADS,
    gpu: raw.SERVICE_GPU === "false" ? false : (raw.SERVICE_GPU as GpuMode),
    gpuOverheadBytes: sizeOrZero("SERVICE_GPU_OVERHEAD", raw.SERVICE_GPU_OVERHEAD),
    modelsConfig: raw.SERVICE_MODELS_CONFIG,
    truncate: booleanOf("SERVICE_TRUNCATE", raw.SERVICE_TRUNCATE),
    maxPredict: raw.SERVICE_MAX_PREDICT,
    streamIntervalMs: atMost(
      "SERVICE_STREAM_INTERVAL",
      1000,
      "1s",
      nonNegative("SERVICE_STREAM_INTERVAL", durationOf("SERVICE_STREAM_INTERVAL", raw.SERVICE_STREAM_INTERVAL)),
    ),
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
export function resolveCacheSettings(
  kvCacheType: KvCacheType,
  flashAttention: FlashAttention,
  fail: (problem: string) => Error,
): { kvCacheType: KvCacheType; flashAttention: FlashAttention } {
  if (kvCacheType === "f16") return { kvCacheType, flashAttention };
  if (flashAttention === false) throw fail(`a ${kvCacheType} KV cache needs flash attention; turn it on (or auto) or use f16`);
  return { kvCacheType, flashAttention: true };
}

function defaultModelsDir(env: Record<string, string | undefined>): string {
  // systemd's StateDirectory= sets STATE_DIRECTORY; elsewhere the store lives in the user's home.
  const stateDir = env.STATE_DIRECTORY?.split(":")[0];
  if (stateDir) return path.join(stateDir, "models");
  return path.join(env.HOME ?? os.homedir(), ".lmd", "models");
}
