/**
 * Logging: pino JSON lines on stdout (journald picks them up under systemd) and, when
 * `SERVICE_LOG_DIR` is set, rotating files through pino-roll (daily and by size, 14 kept).
 *
 * Both destinations run in pino's transport worker thread, so a slow disk never blocks a
 * request; `flushLogger()` waits for them on shutdown.
 */
import path from "node:path";
import { pino, type Logger, type TransportTargetOptions } from "pino";

export type { Logger };

export interface LoggerOptions {
  level: string;
  logDir?: string | undefined;
  /** Extra fields on every line (for example `{ pid }`). */
  base?: Record<string, unknown>;
}

/** How many rotated files are kept, and when a file is rolled. */
export const LOG_ROTATION = { frequency: "daily", size: "50m", keep: 14 } as const;

/** Creates the daemon's logger. */
export function createLogger(options: LoggerOptions): Logger {
  const targets: TransportTargetOptions[] = [{ target: "pino/file", level: options.level, options: { destination: 1 } }];
  if (options.logDir) {
    targets.push({
      target: "pino-roll",
      level: options.level,
      options: {
        file: path.join(options.logDir, "lmd.log"),
        frequency: LOG_ROTATION.frequency,
        size: LOG_ROTATION.size,
        limit: { count: LOG_ROTATION.keep },
        mkdir: true,
        dateFormat: "yyyy-MM-dd",
      },
    });
  }
  return pino(
    {
      level: options.level,
      base: { pid: process.pid, ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ["req.headers.authorization", "req.headers[\"x-api-key\"]"], remove: true },
    },
    pino.transport({ targets }),
  );
}

/** A logger that writes nothing: for unit tests of modules that take a logger. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/** Flushes pending lines through the transport; resolves when they are written (or after `timeoutMs`). */
export async function flushLogger(log: Logger, timeoutMs = 2000): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    log.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
