/**
 * `lmd serve` takes no arguments but `--help`: the help lists the environment variables and starts
 * nothing; any other argument exits 2 with a message instead of starting a daemon that ignores it.
 * A misspelled variable is named at start with the nearest known one.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { VARIABLES } from "../../src/config.js";
import { forkDaemon, MAIN } from "../helpers/process.js";

/** Runs `lmd ARGS` to its end with a private HOME and a listen address nobody else uses. */
function lmd(home: string, args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [MAIN, ...args], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, SERVICE_HOST: "127.0.0.1:0", ...env },
    encoding: "utf8",
    timeout: 20_000,
  });
}

t.test("serve --help prints the usage and every variable, and starts nothing", async (t) => {
  for (const flag of ["--help", "-h"]) {
    const home = t.testdir();
    const r = lmd(home, ["serve", flag]);
    t.equal(r.status, 0, `${flag}: exit 0 (${r.stderr})`);
    t.equal(r.signal, null, `${flag}: it ended by itself (a daemon would have been killed by the timeout)`);
    t.match(r.stdout, /^Start the daemon\n\nUsage:\n {2}lmd serve\n/);
    for (const name of Object.keys(VARIABLES)) t.match(r.stdout, new RegExp(`^  ${name} +\\S`, "m"), `${flag}: lists ${name}`);
    t.match(r.stdout, /^ {2}SERVICE_HOST +listen address .*\(default 127\.0\.0\.1:11434\)$/m, "with its default");
    t.match(r.stdout, /^ {2}OLLAMA_HOST +as SERVICE_HOST$/m, "and Ollama's names");
    t.same(readdirSync(home), [], `${flag}: nothing written to HOME (no ~/.lmd)`);
  }
});

t.test("serve with any other argument exits 2 with a message, before touching anything", async (t) => {
  const cases: [string[], RegExp][] = [
    [
      ["--port", "21498"],
      /^lmd serve: unknown flag '--port': serve takes no arguments; it is configured by environment variables \(e\.g\. SERVICE_HOST=127\.0\.0\.1:8080 lmd serve\); see lmd serve --help\n$/,
    ],
    [["--host=0.0.0.0"], /^lmd serve: unknown flag '--host=0\.0\.0\.0'/],
    [["-p"], /^lmd serve: unknown flag '-p'/],
    [["now"], /^lmd serve: unexpected argument 'now'/],
  ];
  for (const [args, message] of cases) {
    const home = t.testdir();
    const r = lmd(home, ["serve", ...args]);
    t.equal(r.status, 2, `serve ${args.join(" ")}: exit 2`);
    t.match(r.stderr, message, `serve ${args.join(" ")}: the message`);
    t.equal(r.stdout, "", "no log: the daemon did not start");
    t.notOk(existsSync(path.join(home, ".lmd")), "no store created");
  }
});

t.test("lmd gateway: --help lists its variables; an unknown argument exits 2", async (t) => {
  const home = t.testdir();
  const help = lmd(home, ["gateway", "--help"]);
  t.equal(help.status, 0);
  t.match(help.stdout, /^ {2}GATEWAY_UPSTREAM +\S/m, "the gateway's variables");
  const bad = lmd(home, ["gateway", "--port", "1"]);
  t.equal(bad.status, 2);
  t.match(bad.stderr, /^lmd gateway: unknown flag '--port'/);
  const keygen = lmd(home, ["gateway", "keygen", "--bits", "512"]);
  t.equal(keygen.status, 2, "keygen takes no arguments either");
  t.equal(keygen.stdout, "", "and prints no key");
});

t.test("lmd with an unknown command or flag exits 2; --help's columns line up", async (t) => {
  const home = t.testdir();
  const unknown = lmd(home, ["serv"]);
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /^lmd: unknown command 'serv'/);
  const help = lmd(home, ["--help"]);
  t.equal(help.status, 0);
  const rows = help.stdout.split("\n").filter((l) => /^ {2}lmd /.test(l));
  t.ok(rows.length >= 14, "every command is listed");
  const starts = new Set(rows.map((l) => /^ {2}lmd .*?\S {2,}(?=\S)/.exec(l)?.[0].length));
  t.same([...starts].length, 1, `the descriptions start in one column:\n${rows.join("\n")}`);
});

t.test("a misspelled variable is named at start with the nearest known one", async (t) => {
  const home = t.testdir();
  mkdirSync(path.join(home, "m"));
  const d = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: path.join(home, "m"),
    HOME: home,
    SERVICE_KEEPALIVE: "10m",
    OLLAMA_NUM_PARALEL: "2",
  });
  const warned = d.lines.filter((l) => l.level === 40).map((l) => l.msg);
  t.same(warned.sort(), [
    "unknown variable OLLAMA_NUM_PARALEL is ignored; did you mean OLLAMA_NUM_PARALLEL?",
    "unknown variable SERVICE_KEEPALIVE is ignored; did you mean SERVICE_KEEP_ALIVE?",
  ]);
  d.child.kill("SIGTERM");
  await d.exited;
});
