/**
 * What every client command shares: argument parsing with `--help`, the client for SERVICE_HOST,
 * and one way to fail (`Error: <message>` on stderr, exit 1; usage mistakes exit 2).
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { type Client, ClientError, clientFromEnv } from "../api/client.js";
import { withAliases } from "../config.js";

/** Exit statuses of the client commands (docs/cli.md). */
export const EXIT = { ok: 0, error: 1, usage: 2, interrupted: 130 } as const;

/** A usage mistake: printed with the command's usage, exit 2. */
export class UsageError extends Error {}

/** A command's description for `--help` and for parsing. */
export interface CommandSpec {
  /** e.g. `lmd cp SOURCE DESTINATION` */
  usage: string;
  summary: string;
  options?: NonNullable<ParseArgsConfig["options"]>;
  /** One line per option, for `--help`. */
  optionHelp?: string[];
  examples?: string[];
  /** Positional count bounds. */
  minArgs?: number;
  maxArgs?: number;
}

export interface Parsed {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
}

/** The `--help` text of a command. */
export function helpText(spec: CommandSpec): string {
  const lines = [spec.summary, "", "Usage:", `  ${spec.usage}`, "", "Flags:"];
  const rows = ["-h, --help  help for this command", ...(spec.optionHelp ?? [])].map((o) => /^(.*?\S)\s{2,}(\S.*)$/.exec(o) ?? ["", o, ""]);
  const width = Math.max(...rows.map((r) => (r[1] ?? "").length));
  for (const r of rows) lines.push(`  ${(r[1] ?? "").padEnd(width)}   ${r[2] ?? ""}`.trimEnd());
  if (spec.examples?.length) lines.push("", "Examples:", ...spec.examples.map((e) => `  ${e}`));
  lines.push("", "Environment:", "  SERVICE_HOST   address of the lmd daemon (default 127.0.0.1:11434)");
  return `${lines.join("\n")}\n`;
}

/** Parses argv; prints help and exits 0 on `--help`; throws UsageError on mistakes. */
export function parse(argv: string[], spec: CommandSpec): Parsed {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(helpText(spec));
    process.exit(EXIT.ok);
  }
  let parsed: Parsed;
  try {
    parsed = parseArgs({ args: argv, options: spec.options ?? {}, allowPositionals: true, strict: true }) as Parsed;
  } catch (err) {
    throw new UsageError(argumentProblem(err as Error & { code?: string }));
  }
  const n = parsed.positionals.length;
  if (spec.minArgs !== undefined && n < spec.minArgs) throw new UsageError(`expected at least ${spec.minArgs} argument(s), got ${n}`);
  if (spec.maxArgs !== undefined && n > spec.maxArgs) throw new UsageError(`expected at most ${spec.maxArgs} argument(s), got ${n}`);
  return parsed;
}

/**
 * Node's parseArgs messages, in the CLI's words: `unknown flag: --json` (Ollama's wording) instead
 * of a paragraph about positionals that ends on an unbalanced quote.
 */
function argumentProblem(err: Error & { code?: string }): string {
  const unknown = /^Unknown option '([^']*)'/.exec(err.message);
  if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && unknown) return `unknown flag: ${unknown[1]} (a value that begins with '-' goes after '--')`;
  const missing = /^Option '(-\S+)(?:, (-\S+))? <value>' argument missing/.exec(err.message);
  if (missing) return `flag needs a value: ${missing[2] ?? missing[1]}`;
  const noValue = /^Option '([^']*)' does not take an argument/.exec(err.message);
  if (noValue) return `flag takes no value: ${noValue[1]}`;
  return err.message;
}

/** The client for the daemon named by SERVICE_HOST (the CLI's only way to the daemon). */
export function makeClient(options: ConstructorParameters<typeof Client>[0] = {}): Client {
  // OLLAMA_HOST works as an alias of SERVICE_HOST for the CLI too.
  return clientFromEnv(withAliases(process.env).env, options);
}

/**
 * Runs a command body and turns its failure into the CLI's output and exit status:
 * usage → stderr + usage + 2; ClientError and others → `Error: message` + 1.
 */
export async function runCommand(spec: CommandSpec, argv: string[], body: (args: Parsed) => Promise<void>): Promise<void> {
  try {
    await body(parse(argv, spec));
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`Error: ${err.message}\n\n${helpText(spec)}`);
      process.exitCode = EXIT.usage;
      return;
    }
    process.exitCode = EXIT.error;
    // ClientError, ConfigError and ModelfileError carry messages meant for users; LMD_DEBUG shows stacks of the rest.
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`Error: ${message}\n`);
    if (process.env.LMD_DEBUG && err instanceof Error && !(err instanceof ClientError)) process.stderr.write(`${err.stack ?? ""}\n`);
  }
}

/** Writes to stdout and waits for it to drain (piped output must not be cut at exit). */
export function out(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", () => resolve());
  });
}

/** "3 minutes ago" / "4 minutes from now", as Ollama's tables show times. */
export function humanTime(iso: string | undefined, now = Date.now()): string {
  if (!iso) return "";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "";
  const diff = t - now;
  const abs = Math.abs(diff);
  const units: [number, string][] = [
    [365 * 86_400_000, "year"],
    [30 * 86_400_000, "month"],
    [7 * 86_400_000, "week"],
    [86_400_000, "day"],
    [3_600_000, "hour"],
    [60_000, "minute"],
    [1000, "second"],
  ];
  let phrase = "Less than a second";
  for (const [ms, name] of units) {
    if (abs >= ms) {
      const n = Math.floor(abs / ms);
      phrase = n === 1 ? `${name === "hour" ? "An" : "A"} ${name}` : `${n} ${name}s`;
      if (n === 1 && (name === "second" || name === "minute")) phrase = `1 ${name}`;
      break;
    }
  }
  return diff >= 0 ? `${phrase} from now` : `${phrase} ago`;
}

/** Decimal sizes as Ollama prints them (`4.7 GB`, `636 MB`, `12 KB`). */
export function humanSize(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes)) return "";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 || v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

/** Left-aligned columns separated by at least three spaces. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const fmt = (r: string[]) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd((widths[c] ?? 0) + 3))).join("").trimEnd();
  return `${[header, ...rows].map(fmt).join("\n")}\n`;
}

/** The first 12 hex digits of a digest, as model IDs are shown. */
export function shortId(digest: string | undefined): string {
  return (digest ?? "").replace(/^sha256[:-]/, "").slice(0, 12);
}
