/**
 * The variables lmd reads, with their defaults and meanings (docs/configuration.md and the env file
 * are checked against them), Ollama's names read in their place, and the names in an environment
 * that look meant for lmd but are not read.
 */
import { parseBoolean } from "./values.js";

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
  SERVICE_RENDER_TIMEOUT: {
    default: "10s",
    meaning: "a model's own (Jinja) chat template that has not rendered a request's prompt this long: its runner is restarted and the request answered 400",
  },
  SERVICE_THREADS: { default: "", meaning: "CPU threads for inference; unset = the physical cores free when a model loads, then as the load changes" },
  SERVICE_GPU: { default: "auto", meaning: "auto, cuda, vulkan or false" },
  SERVICE_GPU_OVERHEAD: {
    default: "0",
    meaning: "VRAM kept free on each GPU, a size or bytes (room for other programs); models offload fewer layers or are refused instead",
  },
  SERVICE_MAX_PREDICT: {
    default: "0",
    meaning: "server-side cap on generated tokens per request; 0 = 4 x the request's context length; num_predict below it still wins",
  },
  SERVICE_MODELS_CONFIG: {
    default: "",
    meaning: "per-model policy file (YAML or JSON): num_parallel, num_ctx, keep_alive, pinned, preload, options; re-read on SIGHUP",
  },
  SERVICE_STREAM_INTERVAL: {
    default: "10ms",
    meaning: "how long a stream's tokens after its first are gathered before they are written: fewer writes and wake-ups per token; 0 = each token at once; at most 1s",
  },
  SERVICE_KV_CACHE_TYPE: {
    default: "f16",
    meaning: "element type of the KV cache: f16, q8_0 (about half the memory) or q4_0 (about a quarter); a quantized cache needs flash attention",
  },
  SERVICE_FLASH_ATTENTION: {
    default: "auto",
    meaning: "flash attention: auto (on where the model and backend support it, off on the CPU for heads narrower than 64), or a boolean; q8_0 and q4_0 caches turn auto on",
  },
  SERVICE_CACHE_DIR: {
    default: "",
    meaning: "directory of saved prompt prefixes (evaluated states restored after a restart, unload or eviction); default: cache beside the model store",
  },
  SERVICE_CACHE_MAX: { default: "8GiB", meaning: "cap on the saved prompt prefixes, least recently used removed first; 0 = none saved" },
  SERVICE_CACHE_MIN_TOKENS: { default: "1024", meaning: "a slot holding fewer tokens is not saved when its model unloads" },
  SERVICE_TRUNCATE: {
    default: "true",
    meaning: "default of truncate on /api/generate, /api/chat and /v1: true drops the oldest turns of a prompt longer than the context, false answers 400 (1/0/true/false/yes/no/on/off)",
  },
  SERVICE_REGISTRY_AUTH: {
    default: "~/.docker/config.json",
    meaning: "registry credentials in Docker's config.json format (the auths entries docker login writes); read at each pull and push; mode 0600",
  },
  SERVICE_REGISTRY_CA: { default: "", meaning: "PEM file of CA certificates trusted for registries and mirrors, besides the system's" },
  SERVICE_REGISTRY_MIRRORS: {
    default: "",
    meaning: "pull-through mirrors, comma separated <registry host>=<mirror URL> (registry.ollama.ai=https://mirror.lan:5000): pulls try the mirror first, then the registry",
  },
  SERVICE_MAX_UNREFERENCED_BLOBS: {
    default: "64GiB",
    meaning: "bytes of uploaded blobs no model references yet (/api/blobs before /api/create) the store holds at most; an upload past it 507; such blobs are removed an hour after their upload",
  },
} as const;

export type VariableName = keyof typeof VARIABLES;

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
  OLLAMA_DEBUG: {
    variable: "SERVICE_LOG_LEVEL",
    note: "1 = debug, 2 = trace",
    value: (v) => (v.trim() === "2" ? "trace" : parseBoolean(v) === true ? "debug" : undefined),
  },
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
