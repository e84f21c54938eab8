/**
 * Per-model policy (`SERVICE_MODELS_CONFIG`): an operator's file, YAML or JSON, that sets for
 * each model its parallel slots, context length, keep-alive (or pins it), whether it is loaded at
 * start, and default options. Read at start (an invalid file stops the daemon, exit 78) and again
 * on SIGHUP (an invalid file is logged and the policy in force is kept).
 *
 * ```yaml
 * models:
 *   llama3.2:
 *     num_parallel: 4
 *     num_ctx: 8192
 *     keep_alive: 30m
 *     preload: true
 *     options: { temperature: 0.2 }
 *   qwen3:8b:
 *     pinned: true          # never unloaded: no keep-alive expiry, no eviction for room
 *     gpus: [1]             # its runner sees GPU 1 only ([] = no GPU: the CPU)
 * ```
 */
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { Ajv } from "ajv";
import { nameKey, parseModelName } from "../store/names.js";
import { parseDuration } from "../units.js";
import { resolveCacheSettings, type FlashAttention, type KvCacheType } from "../config.js";

/** What the policy says about one model (every field optional). */
export interface ModelPolicy {
  /** The name as the file wrote it. */
  name: string;
  numParallel?: number;
  numCtx?: number;
  /** Milliseconds; negative = forever. */
  keepAliveMs?: number;
  pinned: boolean;
  preload: boolean;
  /** The GPUs (indices) this model's runner may see; undefined = every GPU the daemon sees, [] = none. */
  gpus?: number[];
  /** Default options, between the model's own PARAMETERs and the request's `options`. */
  options: Record<string, unknown>;
  /** The KV cache's type and flash attention for this model, over SERVICE_KV_CACHE_TYPE and SERVICE_FLASH_ATTENTION. */
  kvCacheType?: KvCacheType;
  flashAttention?: FlashAttention;
}

/** The policy file read into model keys; empty when no file is configured. */
export class PolicyTable {
  static readonly EMPTY = new PolicyTable(new Map(), undefined);

  constructor(
    private readonly byKey: ReadonlyMap<string, ModelPolicy>,
    /** The file it was read from. */
    readonly file: string | undefined,
  ) {}

  /** The policy of the model with this store key, if the file names it. */
  for(key: string): ModelPolicy | undefined {
    return this.byKey.get(key);
  }

  /** Every model the file names. */
  entries(): ModelPolicy[] {
    return [...this.byKey.values()];
  }
}

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
const validate = ajv.compile({
  type: "object",
  additionalProperties: false,
  required: ["models"],
  properties: {
    models: {
      type: "object",
      additionalProperties: {
        type: "object",
        additionalProperties: false,
        properties: {
          num_parallel: { type: "integer", minimum: 1, maximum: 64 },
          num_ctx: { type: "integer", minimum: 1 },
          keep_alive: { type: ["string", "number"] },
          pinned: { type: "boolean" },
          preload: { type: "boolean" },
          options: { type: "object" },
          kv_cache_type: { enum: ["f16", "q8_0", "q4_0"] },
          flash_attention: { enum: ["auto", true, false] },
          gpus: { type: "array", items: { type: "integer", minimum: 0, maximum: 1023 }, uniqueItems: true, maxItems: 64 },
        },
      },
    },
  },
});

interface RawPolicy {
  num_parallel?: number;
  num_ctx?: number;
  keep_alive?: string | number;
  pinned?: boolean;
  preload?: boolean;
  options?: Record<string, unknown>;
  kv_cache_type?: KvCacheType;
  flash_attention?: FlashAttention;
  gpus?: number[];
}

/** Reads and checks the policy file; throws an Error whose message says what is wrong and where. */
export async function readPolicyFile(file: string): Promise<PolicyTable> {
  const text = await readBounded(file);
  const doc = await parseYamlOffLoop(text).catch((err: Error) => {
    throw new Error(`${file}: ${err.message.split("\n")[0]}`);
  });
  if (!validate(doc)) {
    const e = validate.errors?.[0];
    throw new Error(`${file}: ${e ? `${e.instancePath || "/"} ${e.message ?? "is invalid"}` : "invalid"}`);
  }
  const byKey = new Map<string, ModelPolicy>();
  for (const [name, raw] of Object.entries((doc as { models: Record<string, RawPolicy> }).models)) {
    let key: string;
    try {
      key = nameKey(parseModelName(name));
    } catch {
      throw new Error(`${file}: invalid model name '${name}'`);
    }
    if (byKey.has(key)) throw new Error(`${file}: model '${name}' is named twice`);
    const policy: ModelPolicy = { name, pinned: raw.pinned ?? false, preload: raw.preload ?? false, options: raw.options ?? {} };
    if (raw.num_parallel !== undefined) policy.numParallel = raw.num_parallel;
    if (raw.num_ctx !== undefined) policy.numCtx = raw.num_ctx;
    if (raw.gpus !== undefined) policy.gpus = [...raw.gpus];
    if (raw.keep_alive !== undefined) {
      const ms = parseDuration(raw.keep_alive);
      if (ms === undefined) throw new Error(`${file}: /models/${name}/keep_alive '${String(raw.keep_alive)}' is not a duration`);
      policy.keepAliveMs = Math.round(ms);
    }
    if (raw.kv_cache_type !== undefined || raw.flash_attention !== undefined) {
      const fail = (problem: string): Error => new Error(`${file}: /models/${name}: ${problem}`);
      const settings = resolveCacheSettings(raw.kv_cache_type ?? "f16", raw.flash_attention ?? "auto", fail);
      if (raw.kv_cache_type !== undefined) policy.kvCacheType = settings.kvCacheType;
      if (raw.flash_attention !== undefined || settings.kvCacheType !== "f16") policy.flashAttention = settings.flashAttention;
    }
    byKey.set(key, policy);
  }
  return new PolicyTable(byKey, file);
}

/** The largest policy file read: about two thousand models with options; parsing it takes milliseconds. */
export const POLICY_MAX_BYTES = 256 * 1024;

/**
 * The file's text, when it is a regular file within the size cap. Opened without blocking (a FIFO
 * with no writer would block the open itself) and checked on the open handle, so that the file
 * read is the file checked.
 */
async function readBounded(file: string): Promise<string> {
  const cannot = (err: NodeJS.ErrnoException): never => {
    throw new Error(`${file}: cannot read it (${err.code ?? err.message})`);
  };
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY).catch(cannot);
  try {
    const st = await handle.stat().catch(cannot);
    if (!st.isFile()) throw new Error(`${file}: not a regular file`);
    if (st.size > POLICY_MAX_BYTES) throw new Error(`${file}: ${st.size} bytes, more than the ${POLICY_MAX_BYTES} a policy file may have`);
    const buffer = Buffer.alloc(POLICY_MAX_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null).catch(cannot);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > POLICY_MAX_BYTES) throw new Error(`${file}: more than the ${POLICY_MAX_BYTES} bytes a policy file may have`);
    }
    return buffer.toString("utf8", 0, length);
  } finally {
    await handle.close();
  }
}

/** How long a policy file's YAML may take to parse, and the heap its parser may use. */
export const POLICY_PARSE_LIMITS = { timeoutMs: 5_000, heapMb: 128 } as const;

const YAML_MODULE = createRequire(import.meta.url).resolve("yaml");
const PARSER = `
const { parentPort, workerData } = require("node:worker_threads");
const { parse } = require(workerData.yaml);
let result;
try {
  result = { doc: parse(workerData.text, { maxAliasCount: 100 }) }; // YAML 1.2 reads JSON too
} catch (err) {
  result = { error: "not valid YAML or JSON: " + String((err && err.message) || err) };
}
parentPort.postMessage(result);
`;

/** Parses YAML in a worker thread, within {@link POLICY_PARSE_LIMITS}. */
function parseYamlOffLoop(text: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(PARSER, {
      eval: true,
      workerData: { text, yaml: YAML_MODULE },
      resourceLimits: { maxOldGenerationSizeMb: POLICY_PARSE_LIMITS.heapMb },
      stdout: true,
      stderr: true,
    });
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`took more than ${POLICY_PARSE_LIMITS.timeoutMs / 1000} s to parse`));
    }, POLICY_PARSE_LIMITS.timeoutMs);
    worker.once("message", (m: { doc?: unknown; error?: string }) => {
      clearTimeout(timer);
      void worker.terminate();
      if (m.error !== undefined) reject(new Error(m.error));
      else resolve(m.doc);
    });
    worker.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`not valid YAML or JSON: ${err.message}`));
    });
    worker.once("exit", () => {
      clearTimeout(timer);
      reject(new Error("its parser stopped"));
    });
  });
}
