/**
 * Durations and sizes as people write them in configuration and requests.
 * A leaf module: used by config, the request schemas and the CLI.
 */

const DURATION_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a Go-style duration (`5m`, `1h30m`, `500ms`, `-1m`) or a plain number of seconds (`300`, `-1`)
 * into milliseconds. Returns undefined when the text is not a duration.
 */
export function parseDuration(text: string | number): number | undefined {
  if (typeof text === "number") return Number.isFinite(text) ? text * 1000 : undefined;
  const s = text.trim();
  if (/^-?[0-9]+(\.[0-9]+)?$/.test(s)) return Number(s) * 1000;
  const m = /^(-?)((?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+)$/.exec(s);
  if (!m) return undefined;
  let total = 0;
  for (const part of (m[2] ?? "").matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) {
    total += Number(part[1]) * (DURATION_UNITS[part[2] ?? "s"] ?? 1000);
  }
  return m[1] === "-" ? -total : total;
}

/**
 * Keep-alives longer than this are "forever" (Ollama's huge and negative durations mean the same):
 * a Date or a timer cannot hold them (`9999999999999999h` made /api/ps fail for everyone).
 */
export const FOREVER_AFTER_MS = 100 * 365 * 24 * 3_600_000;

/** A keep-alive in ms with every overflow mapped to -1 (forever). */
export function keepAliveOrForever(ms: number): number {
  return Number.isFinite(ms) && ms <= FOREVER_AFTER_MS ? ms : -1;
}

/** The longest delay a Node timer can hold (~24.8 days); longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const SIZE_UNITS: Record<string, number> = {
  "": 1, b: 1,
  k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9,
  kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3,
};

/** Parses `8MiB`, `8MB`, `1048576` into bytes; undefined when it is not a size. */
export function parseSize(text: string): number | undefined {
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$/i.exec(text.trim());
  if (!m) return undefined;
  const unit = SIZE_UNITS[(m[2] ?? "").toLowerCase()];
  return unit === undefined ? undefined : Math.floor(Number(m[1]) * unit);
}

/** Human-readable byte count (`1.2 GiB`) for messages and tables. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

let isoMs = Number.NaN;
let iso = "";
/** `new Date().toISOString()`, formatted once per millisecond: every line of a stream carries it. */
export function isoNow(): string {
  const ms = Date.now();
  if (ms !== isoMs) {
    isoMs = ms;
    iso = new Date(ms).toISOString();
  }
  return iso;
}
