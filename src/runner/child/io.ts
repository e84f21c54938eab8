/**
 * What the runner child's parts use of its channel to the parent: `send` (through the outbox, which
 * gathers a job's output) and `log` (a `log` message the parent writes to its journal).
 */
import path from "node:path";
import type { FromRunner } from "../protocol.js";

export type LogLevel = "debug" | "info" | "warn" | "error";

/** The channel to the parent, as the loaded model and the jobs see it. */
export interface ChildIo {
  send(msg: FromRunner): void;
  log(level: LogLevel, msg: string, data?: Record<string, unknown>): void;
}

/** Error text that is safe for a client: no absolute paths of the store. */
export function clientSafe(err: unknown, modelFile?: string): string {
  let text = err instanceof Error ? err.message : String(err);
  if (modelFile) text = text.split(modelFile).join(path.basename(modelFile));
  return text.replace(/\s+/g, " ").trim() || "unknown error";
}
