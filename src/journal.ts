/**
 * Log records as journal entries, when stdout is the journal (JOURNAL_STREAM names it): each pino
 * record goes to journald's native socket (src/native/systemd.c) with
 *
 * - PRIORITY from the level (fatal 2, error 3, warn 4, info 6, debug and trace 7), so
 *   `journalctl -u lmd -p err` lists failures;
 * - MESSAGE, a readable line: the record's message and its main facts (a request's method, path,
 *   status and duration; an error's message);
 * - a field per record key, LMD_ and the key in upper snake case (`model` → LMD_MODEL, `reqId` →
 *   LMD_REQUEST_ID, `status` → LMD_STATUS, `durationMs` → LMD_DURATION_MS), objects as JSON, so
 *   `journalctl -u lmd LMD_MODEL=demo` finds a model's lines;
 * - for an error with a stack, CODE_FILE, CODE_LINE and CODE_FUNC of its first frame, and the
 *   stack in LMD_ERROR_STACK.
 *
 * Without the addon, or when the journal's socket refuses an entry, the record is written to
 * stdout as JSON, as off the journal.
 */
import { pino, type DestinationStream } from "pino";
import { stdoutIsJournal, systemdAddon } from "./systemd.js";

const PRIORITY: Record<number, number> = { 60: 2, 50: 3, 40: 4, 30: 6, 20: 7, 10: 7 };
/** Record keys that the journal has already (its own _PID, timestamps, host) or that MESSAGE carries. */
const SKIP = new Set(["level", "time", "pid", "hostname", "msg", "v"]);
const RENAME: Record<string, string> = { reqId: "REQUEST_ID" };

/** A destination that writes journal entries, or undefined when stdout is not the journal. */
export function journalDestination(env: NodeJS.ProcessEnv): DestinationStream | undefined {
  if (!stdoutIsJournal(env)) return undefined;
  const sd = systemdAddon();
  if (!sd) return undefined;
  const fallback = pino.destination({ dest: 1, sync: true });
  return {
    write(line: string) {
      let entry: Buffer;
      try {
        entry = journalEntry(JSON.parse(line) as Record<string, unknown>);
      } catch {
        fallback.write(line);
        return;
      }
      if (sd.journal(entry) !== 0) fallback.write(line);
    },
  };
}

/** The native protocol's bytes for one record. */
export function journalEntry(record: Record<string, unknown>): Buffer {
  const parts: Buffer[] = [];
  const field = (name: string, value: string): void => {
    if (!value.includes("\n")) {
      parts.push(Buffer.from(`${name}=${value}\n`));
      return;
    }
    // A value with newlines: the name, a newline, its length as 64-bit little-endian, the bytes.
    const bytes = Buffer.from(value);
    const size = Buffer.alloc(8);
    size.writeBigUInt64LE(BigInt(bytes.length));
    parts.push(Buffer.from(`${name}\n`), size, bytes, Buffer.from("\n"));
  };
  field("MESSAGE", message(record));
  field("PRIORITY", String(PRIORITY[record.level as number] ?? 6));
  field("SYSLOG_IDENTIFIER", "lmd");
  for (const [key, value] of Object.entries(record)) {
    if (SKIP.has(key) || value === undefined || value === null) continue;
    const name = `LMD_${RENAME[key] ?? snake(key)}`;
    if (key === "err" && typeof value === "object") {
      const err = value as { message?: unknown; stack?: unknown; type?: unknown };
      if (typeof err.message === "string") field("LMD_ERROR", err.message);
      if (typeof err.stack === "string") {
        field("LMD_ERROR_STACK", err.stack);
        const at = firstFrame(err.stack);
        if (at) {
          field("CODE_FILE", at.file);
          field("CODE_LINE", at.line);
          if (at.func) field("CODE_FUNC", at.func);
        }
      }
      continue;
    }
    if (name.length > 64) continue;
    field(name, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return Buffer.concat(parts);
}

/** `durationMs` → `DURATION_MS`; anything outside A–Z, 0–9 becomes `_`. */
function snake(key: string): string {
  return key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

/** The line a person reads: the message, then the facts that make it useful on its own. */
function message(r: Record<string, unknown>): string {
  const msg = typeof r.msg === "string" ? r.msg : "";
  if (msg === "request" || msg === "request failed") {
    const head = `${String(r.method)} ${String(r.path)} ${String(r.status)} in ${String(r.durationMs)} ms`;
    const model = typeof r.model === "string" ? ` (model ${r.model})` : "";
    const why = typeof r.error === "string" ? `: ${r.error}` : errorMessage(r);
    return `${msg === "request" ? "request" : "request failed"}: ${head}${model}${why}`;
  }
  const facts: string[] = [];
  if (typeof r.model === "string") facts.push(`model ${r.model}`);
  if (typeof r.err === "string") facts.push(r.err);
  const detail = errorMessage(r);
  return `${msg}${facts.length > 0 ? ` (${facts.join(", ")})` : ""}${detail}`;
}

function errorMessage(r: Record<string, unknown>): string {
  const err = r.err as { message?: unknown } | undefined;
  return err && typeof err === "object" && typeof err.message === "string" ? `: ${err.message}` : "";
}

/** The file, line and function of a stack's first frame (`at f (file:line:col)` or `at file:line:col`). */
function firstFrame(stack: string): { file: string; line: string; func: string | undefined } | undefined {
  const m = /^\s*at (?:(.+?) \()?(.+?):(\d+):\d+\)?$/m.exec(stack);
  if (!m) return undefined;
  return { file: m[2]!.replace(/^file:\/\//, ""), line: m[3]!, func: m[1] };
}
