/**
 * The help texts of `lmd` itself and of `lmd serve`, and the check of `serve`'s arguments.
 * `serve` is configured by environment variables only, so any argument but `--help` is a mistake
 * (a `--port 8080` that is ignored would leave the daemon on SERVICE_HOST without a word).
 */
import { ALIASES, VARIABLES } from "./config.js";
import { VERSION } from "./version.js";

/** Rows of the two-column lists below: the first column padded to the widest entry. */
export function columns(rows: readonly (readonly [string, string])[], indent = "  ", gap = 3): string {
  const width = Math.max(...rows.map(([a]) => a.length));
  return rows.map(([a, b]) => `${indent}${a.padEnd(width + gap)}${b}`.trimEnd()).join("\n");
}

const COMMANDS: readonly (readonly [string, string])[] = [
  ["lmd serve", "Start the daemon (configured by SERVICE_* environment variables)"],
  ["lmd gateway", "Start the authenticating gateway (configured by GATEWAY_* variables)"],
  ["lmd run MODEL [PROMPT]", "Run a model: one answer, or an interactive chat"],
  ["lmd pull MODEL", "Pull a model from a registry"],
  ["lmd push MODEL", "Push a model to a registry"],
  ["lmd create MODEL -f FILE", "Create a model from a Modelfile"],
  ["lmd list, lmd ls", "List models in the store"],
  ["lmd ps", "List running models"],
  ["lmd show MODEL", "Show information for a model"],
  ["lmd cp SOURCE DEST", "Copy a model"],
  ["lmd rm MODEL...", "Remove models"],
  ["lmd stop MODEL", "Unload a running model"],
  ["lmd doctor", "Check the configuration, store, address, backends and unit"],
  ["lmd reload", "Make the daemon under systemd re-read its policy file and log level"],
  ["lmd version", "Print the version (client, and server when one answers)"],
  ["lmd help", "Show this help"],
];

/** `lmd --help`. */
export function usage(): string {
  return `lmd ${VERSION} — local model-serving daemon

Usage:
${columns(COMMANDS)}

Client commands reach the daemon at SERVICE_HOST (default 127.0.0.1:11434); each takes --help.
`;
}

/** `lmd serve --help`: the usage and every variable with its default and meaning. */
export function serveHelp(): string {
  const rows = Object.entries(VARIABLES).map(([name, v]): [string, string] => [name, `${v.meaning}${v.default === "" ? "" : ` (default ${v.default})`}`]);
  const aliases = Object.entries(ALIASES).map(([alias, { variable, note }]): [string, string] => [alias, `as ${variable}${note ? ` (${note})` : ""}`]);
  return `Start the daemon

Usage:
  lmd serve

Flags:
  -h, --help   help for serve

serve takes no other flags: it is configured by environment variables (docs/configuration.md).

Environment variables:
${columns(rows)}

Ollama's variables are read where the SERVICE_ variable is unset or empty:
${columns(aliases)}
`;
}

/** What `lmd serve ARGS` should do: start, print the help, or refuse an argument (exit 2). */
export function serveArguments(argv: readonly string[]): { action: "start" } | { action: "help" } | { action: "refuse"; message: string } {
  if (argv.includes("--help") || argv.includes("-h") || argv[0] === "help") return { action: "help" };
  const first = argv[0];
  if (first === undefined) return { action: "start" };
  const what = first.startsWith("-") ? `unknown flag '${first}'` : `unexpected argument '${first}'`;
  return {
    action: "refuse",
    message: `lmd serve: ${what}: serve takes no arguments; it is configured by environment variables (e.g. SERVICE_HOST=127.0.0.1:8080 lmd serve); see lmd serve --help`,
  };
}
