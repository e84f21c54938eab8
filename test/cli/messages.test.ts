/**
 * What the client commands say when something is off, as a user sees it (the built CLI against a
 * real daemon): a flag a command does not know, the removal of a model that is not there, and
 * `--verbose` timings printed as Ollama prints durations.
 */
import t from "tap";
import { goDuration } from "../../src/cli/session.js";
import { startDaemon } from "../helpers/daemon.js";
import { lmd } from "./cli.js";

const daemon = await startDaemon(t, { models: [{ name: "tiny", install: { params: { num_predict: 4, seed: 7 } } }] });
const { url } = daemon;

t.test("an unknown flag: one short line, the command's usage, exit 2 — for every client command", async (t) => {
  for (const command of ["list", "ls", "ps", "show", "cp", "rm", "stop", "run", "pull", "push", "create", "version"]) {
    const r = await lmd(url, [command, "--json"]);
    t.equal(r.code, 2, `${command} --json: exit 2`);
    const first = r.stderr.split("\n")[0] ?? "";
    t.equal(first, "Error: unknown flag: --json (a value that begins with '-' goes after '--')", `${command}: the message`);
    t.equal((first.match(/'/g) ?? []).length % 2, 0, `${command}: quotes are balanced`);
    t.notMatch(r.stderr, /To specify a positional argument/, `${command}: not Node's own text`);
    t.match(r.stderr, /\nUsage:\n {2}lmd /, `${command}: the usage follows`);
    t.equal(r.stdout, "");
  }
  const missing = await lmd(url, ["run", "tiny", "--keepalive"]);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /^Error: flag needs a value: --keepalive\n/);
});

t.test("lmd rm of a model that is not there says it is not found, and nothing about pulling", async (t) => {
  const r = await lmd(url, ["rm", "nope"]);
  t.equal(r.code, 1);
  t.equal(r.stderr, "Error: model 'nope' not found\n");
});

t.test("--verbose prints durations as Go does: no 0.000µs", async (t) => {
  // Go's text: a zero is 0s; a fraction has no trailing zeros.
  const GO = /^(0s|\d+ns|\d+(\.\d{0,2}[1-9])?(µs|ms|s)|(\d+h)?\d+m\d+(\.\d{0,2}[1-9])?s)$/;
  // The second run finds the model loaded: its load takes (next to) no time.
  for (const run of ["first", "second"]) {
    const r = await lmd(url, ["run", "tiny", "--verbose", "hello"]);
    t.equal(r.code, 0, r.stderr);
    const durations = [...r.stderr.matchAll(/^(total duration|load duration|prompt eval duration|eval duration): +(\S+)$/gm)].map((m) => [m[1], m[2]]);
    t.equal(durations.length, 4, r.stderr);
    for (const [name, value] of durations) t.match(value, GO, `${run} run: ${name}: ${value}`);
  }
});

t.test("goDuration: Go's time.Duration text at three decimals", async (t) => {
  const cases: [number, string][] = [
    [0, "0s"],
    [-5, "0s"],
    [850, "850ns"],
    [12_500, "12.5µs"],
    [3_204_000, "3.204ms"],
    [1_500_000_000, "1.5s"],
    [60e9, "1m0s"],
    [123.25e9, "2m3.25s"],
    [3723e9, "1h2m3s"],
  ];
  for (const [ns, text] of cases) t.equal(goDuration(ns), text, `${ns} ns`);
});
