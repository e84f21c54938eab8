/**
 * The environment's JSON Schema for env-schema (types, ranges, enums, defaults), the shape it
 * returns, and its errors as sentences that quote the value and say what is accepted.
 */
import { VARIABLES } from "./variables.js";
import { ConfigError } from "./values.js";

export const schema = {
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

export interface RawEnv {
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

export function fromSchemaError(err: unknown, data: Record<string, string>): ConfigError {
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
