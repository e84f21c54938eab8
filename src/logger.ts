/**
 * Logging: pino lines on stdout — JSON for a pipe or a file; readable lines (pino-pretty, one line
 * per record) when stdout is a terminal; journal entries with their priority and fields when stdout
 * is the journal (src/journal.ts) — and, when `SERVICE_LOG_DIR` is set, rotating JSON
 * files through pino-roll (daily and by size, 14 kept).
 *
 * Stdout is written from the main thread, synchronously, as pino does by default (and as Node
 * writes to a pipe). pino's destination drops everything after EPIPE, so a reader that went away
 * (`lmd serve | tee log`, then Ctrl+C) never kills or holds the daemon; with nothing buffered, the
 * exit path has nothing to wait for. (Through a worker-thread transport, the exit waited 10 s
 * and more on a worker whose destination had failed.) Files are written in pino's transport
 * worker thread, so a slow disk never blocks a request; `flushLogger()` waits for them.
 */
import path from "node:path";
import { isatty } from "node:tty";
import { pino, type DestinationStream, type Logger, type StreamEntry } from "pino";
import { prettyFactory } from "pino-pretty";
import { journalDestination } from "./journal.js";

export type { Logger };

export interface LoggerOptions {
  level: string;
  logDir?: string | undefined;
  /** Extra fields on every line (for example `{ pid }`). */
  base?: Record<string, unknown>;
}

/** How many rotated files are kept, and when a file is rolled. */
export const LOG_ROTATION = { frequency: "daily", size: "50m", keep: 14 } as const;

/** The destinations of each logger, for `flushLogger`. */
const destinations = new WeakMap<Logger, DestinationStream[]>();

/** Creates the daemon's logger. */
export function createLogger(options: LoggerOptions): Logger {
  // The logger's own level filters; the streams take every record it passes, so that a reload can
  // change the level (`log.level = ...`) for all of them.
  const level: pino.Level = "trace";
  const streams: StreamEntry[] = [{ level, stream: stdoutDestination() }];
  if (options.logDir) {
    const file = pino.transport({
      target: "pino-roll",
      options: {
        file: path.join(options.logDir, "lmd.log"),
        frequency: LOG_ROTATION.frequency,
        size: LOG_ROTATION.size,
        limit: { count: LOG_ROTATION.keep },
        mkdir: true,
        dateFormat: "yyyy-MM-dd",
      },
    });
    streams.push({ level, stream: file });
  }
  const log = pino(
    {
      level: options.level,
      base: { pid: process.pid, ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ["req.headers.authorization", "req.headers[\"x-api-key\"]"], remove: true },
    },
    pino.multistream(streams),
  );
  destinations.set(log, streams.map((s) => s.stream));
  return log;
}

function stdoutDestination(): DestinationStream {
  const journal = journalDestination(process.env);
  if (journal) return journal;
  const out = pino.destination({ dest: 1, sync: true });
  if (!isatty(1)) return out;
  // A person at a terminal reads `[12:00:00.000] INFO: message {"field":...}`: one line per record
  // (an error's stack below it). Formatted here, synchronously, so that the last lines before an
  // exit are never lost.
  const prettify = prettyFactory({ colorize: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname", singleLine: true, errorLikeObjectKeys: ["err"] });
  return { write: (line: string) => out.write(prettify(line)) };
}

/** A logger that writes nothing: for unit tests of modules that take a logger. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/** Flushes pending lines to every destination; resolves when they are written (or after `timeoutMs`). */
export async function flushLogger(log: Logger, timeoutMs = 2000): Promise<void> {
  const flushes = (destinations.get(log) ?? []).map((stream) => new Promise<void>((resolve) => {
    const flush = (stream as { flush?: (cb: () => void) => void }).flush;
    if (flush) flush.call(stream, () => resolve());
    else resolve();
  }));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(flushes), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}
