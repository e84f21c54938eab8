/**
 * The grammar of the configuration's values: booleans, durations, sizes, lists, `~`, mirrors. Every
 * problem is a ConfigError that names its variable.
 */
import os from "node:os";
import path from "node:path";
import { MAX_TIMER_MS, parseDuration, parseSize } from "../units.js";

/** A configuration problem: `main` prints it and exits 78 (EX_CONFIG). */
export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`invalid configuration: ${variable}: ${problem}`);
    this.name = "ConfigError";
  }
}

/** Booleans as systemd and Ollama read them: 1/0, true/false, yes/no, on/off, any case; else undefined. */
export function parseBoolean(value: string): boolean | undefined {
  const v = value.trim().toLowerCase();
  if (["1", "true", "yes", "on", "y", "t"].includes(v)) return true;
  if (["0", "false", "no", "off", "n", "f"].includes(v)) return false;
  return undefined;
}

/** `~` and `~/...` mean the home directory, as a shell would (env files and quoted values skip the shell). */
export function expandHome(dir: string, env: Record<string, string | undefined>): string {
  if (dir === "~") return env.HOME ?? os.homedir();
  if (dir.startsWith("~/")) return path.join(env.HOME ?? os.homedir(), dir.slice(2));
  return dir;
}

/** A boolean variable: 1/0, true/false, yes/no, on/off, any case. */
export function booleanOf(variable: string, value: string): boolean {
  const v = value.toLowerCase();
  if (["1", "true", "yes", "on"].includes(v)) return true;
  if (["0", "false", "no", "off"].includes(v)) return false;
  throw new ConfigError(variable, `'${value}' is not a boolean (1/0, true/false, yes/no, on/off)`);
}

/**
 * `registry.ollama.ai=https://mirror.lan:5000,hf.co=http://10.0.0.5:5000`: each registry host's
 * mirrors in the order given (a host may be named more than once). A mirror is an origin: the
 * distribution API lives at its `/v2/`, so a path is refused.
 */
export function parseMirrors(value: string, variable: string): ReadonlyMap<string, readonly string[]> {
  const out = new Map<string, string[]>();
  for (const entry of splitList(value)) {
    const eq = entry.indexOf("=");
    const host = eq < 0 ? "" : entry.slice(0, eq).trim().toLowerCase();
    const target = eq < 0 ? "" : entry.slice(eq + 1).trim();
    if (!/^[a-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9a-f:.]+\](:[0-9]{1,5})?$/.test(host) || target === "") {
      throw new ConfigError(variable, `'${entry}' is not <registry host>=<mirror URL>`);
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new ConfigError(variable, `'${target}' is not a URL (example: https://mirror.lan:5000)`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new ConfigError(variable, `'${target}': a mirror is an http:// or https:// URL`);
    if (url.pathname !== "/" || url.search || url.hash || url.username || url.password) {
      throw new ConfigError(variable, `'${target}': a mirror is named by its origin only (scheme://host:port), without path or credentials`);
    }
    out.set(host, [...(out.get(host) ?? []), url.origin]);
  }
  return out;
}

export function splitList(value: string): string[] {
  return value.split(",").map((s) => s.trim()).filter((s) => s !== "");
}

export function durationOf(variable: string, value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) throw new ConfigError(variable, `'${value}' is not a duration (examples: 30s, 5m, 1h, 300)`);
  return ms;
}

export function sizeOf(variable: string, value: string): number {
  const bytes = parseSize(value);
  if (bytes === undefined || bytes < 1) throw new ConfigError(variable, `'${value}' is not a size (examples: 8MiB, 1048576)`);
  return bytes;
}

/** A size that may be 0 (Ollama's OLLAMA_GPU_OVERHEAD is a byte count, 0 by default). */
export function sizeOrZero(variable: string, value: string): number {
  const bytes = parseSize(value);
  if (bytes === undefined) throw new ConfigError(variable, `'${value}' is not a size (examples: 1GiB, 536870912, 0)`);
  return bytes;
}

export function nonNegative(variable: string, ms: number): number {
  if (ms < 0) throw new ConfigError(variable, "must not be negative");
  return ms;
}

export function positive(variable: string, ms: number): number {
  if (ms <= 0) throw new ConfigError(variable, "must be positive");
  return ms;
}

export function atMost(variable: string, limitMs: number, limit: string, ms: number): number {
  if (ms > limitMs) throw new ConfigError(variable, `must be at most ${limit}`);
  return ms;
}

/** A timeout a Node timer can hold: longer ones would fire at once instead of never. */
export function timerDuration(variable: string, ms: number): number {
  if (ms > MAX_TIMER_MS) throw new ConfigError(variable, "must be at most 24 days (596h)");
  return ms;
}
