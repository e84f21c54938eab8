/**
 * `lmd run`, `stop`, `version` and the not-running message, driven as a user would: the built CLI
 * as a child process against a real daemon (real runner, tiny model), and `lmd run` inside a real
 * terminal (tmux): streamed output, Ctrl+C stops an answer and the session goes on, `/bye` exits 0.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { startDaemon } from "../helpers/daemon.js";
import { lmd, terminal, terminalSkip, waitUntil } from "./cli.js";
import { VERSION } from "../../src/version.js";

// num_predict 12 in the model's params keeps answers short on a busy CI machine. No server cap short
// of 100,000 tokens: the interactive test's unbounded answer can only end by Ctrl+C, on a fast machine too.
const daemon = await startDaemon(t, { env: { SERVICE_MAX_PREDICT: "100000" }, models: [{ name: "tiny", install: { params: { num_predict: 12, seed: 7 } } }] });
const { url } = daemon;
// The prompt, with or without the dimmed placeholder after it (capture-pane drops its trailing blank).
const PROMPT = String.raw`>>>(?: Send a message \(/\? for help\))?`;
const loaded = () => daemon.app.services.scheduler.list().map((m) => m.model.display);

t.test("one-shot: lmd run tiny hello prints the answer and exits 0", async (t) => {
  const r = await lmd(url, ["run", "tiny", "hello"]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stderr, "");
  t.ok(r.stdout.trim().length > 0, `an answer: ${JSON.stringify(r.stdout)}`);
  t.ok(r.stdout.endsWith("\n"));
});

t.test("piped stdin is the prompt", async (t) => {
  const r = await lmd(url, ["run", "tiny", "--verbose"], { input: "why is the sky blue?\n" });
  t.equal(r.code, 0, r.stderr);
  t.ok(r.stdout.trim().length > 0);
  t.match(r.stderr, /eval count: +\d+ token\(s\)/, "--verbose prints timings on stderr");
  t.match(r.stderr, /eval rate: +[\d.]+ tokens\/s/);
});

t.test("lmd stop unloads the model", async (t) => {
  t.ok(loaded().some((n) => n.startsWith("tiny")), `loaded before: ${loaded().join(",")}`);
  const r = await lmd(url, ["stop", "tiny"]);
  t.equal(r.code, 0, r.stderr);
  t.same(loaded(), []);
});

t.test("an unknown model: the daemon's error, exit 1", async (t) => {
  const r = await lmd(url, ["run", "nope", "hi"]);
  t.equal(r.code, 1);
  t.equal(r.stderr, "Error: model 'nope' not found, try pulling it first\n");
});

t.test("usage mistakes exit 2 and print the usage", async (t) => {
  const r = await lmd(url, ["run"]);
  t.equal(r.code, 2);
  t.match(r.stderr, /^Error: expected at least 1 argument\(s\), got 0\n\nRun a model/);
  const h = await lmd(url, ["pull", "--help"]);
  t.equal(h.code, 0);
  t.match(h.stdout, /Usage:\n {2}lmd pull MODEL \[--insecure\]/);
});

t.test("version names the server's version", async (t) => {
  const r = await lmd(url, ["version"]);
  t.equal(r.code, 0);
  t.equal(r.stdout, `lmd version is ${VERSION}\n`);
});

t.test("nothing listening: the not-running message, exit 1", async (t) => {
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  const r = await lmd(`127.0.0.1:${port}`, ["list"]);
  t.equal(r.code, 1);
  t.equal(r.stderr, `Error: lmd is not running at http://127.0.0.1:${port} — start it with 'systemctl start lmd' or 'lmd serve'\n`);
});

t.test("interactive, in a terminal: streaming, Ctrl+C, /bye", { skip: terminalSkip }, async (t) => {
  const term = await terminal(t, url, ["run", "tiny"]);
  await term.waitFor(new RegExp(`${PROMPT}$`), 120_000);
  await term.keys(["/set parameter num_predict -1", "Enter"]);
  await term.waitFor(/Set parameter 'num_predict' to '-1'/);
  // Greedy: a random-weight model sampling at 0.8 may end its answer early, by chance.
  await term.keys(["/set parameter temperature 0", "Enter"]);
  await term.waitFor(/Set parameter 'temperature' to '0'/);

  await term.keys(["tell me a long story", "Enter"]);
  const answerOf = (screen: string) => screen.split(">>> tell me a long story\n")[1]?.split(/\n>>>/)[0]?.trim() ?? "";
  const first = answerOf(await term.waitFor((s) => answerOf(s).length > 0, 120_000));
  // Streamed: the answer grows on screen while the request is still running.
  const grown = answerOf(await term.waitFor((s) => answerOf(s).length > first.length + 5, 60_000));
  t.ok(grown.startsWith(first), "the answer appears piece by piece");
  t.ok(daemon.app.services.scheduler.list().some((m) => m.active > 0), "the request is in flight");

  await term.keys(["C-c"]);
  await term.waitFor(new RegExp(`tell me a long story\\n[\\s\\S]+\\n${PROMPT}$`), 15_000);
  // Unbounded (up to 100,000 tokens, minutes even on a fast machine): only the Ctrl+C ends it this soon.
  t.ok(
    await waitUntil(() => daemon.app.services.scheduler.list().every((m) => m.active === 0), 10_000),
    "the daemon stopped generating: the answer was cut short",
  );
  t.equal(await term.exitStatus(), undefined, "still running after Ctrl+C");

  await term.keys(["/set parameter num_predict 3", "Enter"]);
  // Typed only once the prompt is back: keys that arrive together are all echoed before the
  // first line's command prints, and the screen would not read in order.
  await term.waitFor(new RegExp(`Set parameter 'num_predict' to '3'\\n${PROMPT}$`));
  // A multi-line message, typed a line at a time as a person would (each after its "... " prompt).
  await term.keys(['"""', "Enter"]);
  await term.waitFor(/>>> """\n\.\.\.$/);
  await term.keys(["two", "Enter"]);
  await term.waitFor(/\.\.\. two\n\.\.\.$/);
  await term.keys(['lines"""', "Enter"]);
  await term.waitFor(new RegExp(`\\.\\.\\. lines"""\\n[\\s\\S]*\\S[\\s\\S]*\\n${PROMPT}$`), 120_000);
  await term.keys(["/bye", "Enter"]);
  await waitUntil(async () => (await term.exitStatus()) !== undefined, 15_000);
  t.equal(await term.exitStatus(), 0, "/bye exits 0");
});
