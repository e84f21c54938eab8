/**
 * Bounds on what a job asks of the runner beyond its prompt (checked by the parent before a job is
 * sent; docs/security.md). Compiling a `format` schema into a grammar and preparing stop sequences
 * run synchronously in the runner, before the first token, and cost time and memory in proportion
 * to their size (a large enum takes seconds, long stop sequences hold memory for good). Each limit
 * is far above what a real request needs; a request over one is a 400 naming it.
 */
import type { ToRunner } from "./protocol.js";
import type { GenerateJob, ChatJob } from "./types.js";

/** Bytes of a `format` JSON schema (as JSON). */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/** Alternatives a `format` schema offers in all: `enum` values and `anyOf`/`oneOf` branches. */
export const MAX_SCHEMA_ALTERNATIVES = 1024;
/** Stop sequences of one request (the API schemas' own maxItems; a Modelfile's PARAMETER stop lines too). */
export const MAX_STOP_SEQUENCES = 16;
/** Characters of one stop sequence. */
export const MAX_STOP_CHARACTERS = 4096;

/** Deepest nesting of a job sent to a runner (the job's own envelope takes about five levels). */
const MAX_JOB_DEPTH = 128;

/** Why a job breaks a limit (the client's 400), or undefined. */
export function jobLimitError(msg: ToRunner): string | undefined {
  // IPC serialises with JSON.stringify, which overflows the stack on very deep values (a `format`
  // or tool schema nested thousands of levels): refuse those before sending.
  if (nestedDeeperThan(msg, MAX_JOB_DEPTH)) return `request nested too deeply (more than ${MAX_JOB_DEPTH} levels)`;
  if (msg.type !== "generate" && msg.type !== "chat") return undefined;
  const job: GenerateJob | ChatJob = msg.job;
  if (job.stop.length > MAX_STOP_SEQUENCES) return `too many stop sequences: ${job.stop.length} (the limit is ${MAX_STOP_SEQUENCES})`;
  const long = job.stop.find((s) => s.length > MAX_STOP_CHARACTERS);
  if (long !== undefined) return `stop sequence too long: ${long.length} characters (the limit is ${MAX_STOP_CHARACTERS})`;
  if (job.grammar?.kind !== "schema") return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(job.grammar.schema), "utf8");
  if (bytes > MAX_SCHEMA_BYTES) return `format schema too large: ${bytes} bytes of JSON (the limit is ${MAX_SCHEMA_BYTES})`;
  const alternatives = countAlternatives(job.grammar.schema);
  if (alternatives > MAX_SCHEMA_ALTERNATIVES)
    return `format schema has too many alternatives: ${alternatives} enum values and anyOf/oneOf branches (the limit is ${MAX_SCHEMA_ALTERNATIVES})`;
  return undefined;
}

/** `enum` values and `anyOf`/`oneOf` branches anywhere in `value`. */
function countAlternatives(value: unknown): number {
  if (value === null || typeof value !== "object") return 0;
  let n = 0;
  if (Array.isArray(value)) {
    for (const item of value) n += countAlternatives(item);
    return n;
  }
  for (const [key, child] of Object.entries(value)) {
    if ((key === "enum" || key === "anyOf" || key === "oneOf") && Array.isArray(child)) n += child.length;
    n += countAlternatives(child);
  }
  return n;
}

/** True when `value` nests objects/arrays more than `limit` levels; stops looking at the limit. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== "object") return false;
  if (limit === 0) return true;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (nestedDeeperThan(v, limit - 1)) return true;
  return false;
}
