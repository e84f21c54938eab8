/**
 * The interactive session of `lmd run` where Ollama users' habits live, in a
 * real terminal (tmux) against a real daemon: the dimmed `Send a message (/? for help)` placeholder,
 * Ctrl+D leaving the shell prompt on its own line, `/show parameters` with the session's own
 * parameters, `/set think|nothink|history|nohistory|wordwrap|nowordwrap`, `/save` and `/load`.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import type { Test } from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { terminal, terminalSkip, waitUntil, type Terminal } from "./cli.js";

// num_predict 12 in the model's params keeps answers short on a busy machine.
const daemon = await startDaemon(t, { models: [{ name: "tiny", install: { params: { num_predict: 12, seed: 7 } } }] });
const { url } = daemon;

const PLACEHOLDER_PROMPT = ">>> Send a message (/? for help)";
const lines = (screen: string) => screen.split("\n");
const lastLine = (screen: string) => lines(screen).at(-1) ?? "";
// Waiting for the prompt accepts it with or without the placeholder: each test below fails on its
// own subject, not all on the placeholder (capture-pane drops the trailing blank of ">>> ").
const atPrompt = (screen: string) => lastLine(screen) === ">>>" || lastLine(screen) === PLACEHOLDER_PROMPT;

/** Starts `lmd run tiny` and waits for its first prompt. */
async function session(t: Test, options: Parameters<typeof terminal>[3] = {}): Promise<Terminal> {
  const term = await terminal(t, url, ["run", "tiny"], options);
  await term.waitFor(atPrompt, 120_000);
  return term;
}

/** Types one line, presses Enter, and returns what it printed once the prompt is back. */
async function command(term: Terminal, line: string, timeoutMs = 60_000): Promise<string> {
  const before = lines(await term.screen()).length;
  await term.keys([line], true);
  await term.keys(["Enter"]);
  const screen = await term.waitFor((s) => lines(s).length > before && atPrompt(s), timeoutMs);
  const all = lines(screen);
  const start = all.lastIndexOf(`>>> ${line}`);
  return all.slice(start + 1, -1).join("\n");
}

t.test("the prompt: placeholder, help for the new commands, Ctrl+D leaves the shell prompt on its own line", { skip: terminalSkip }, async (t) => {
  const term = await session(t, { shellPrompt: "shell$ " });
  const placeholder = (s: string) => lastLine(s) === PLACEHOLDER_PROMPT;
  t.ok(placeholder(await term.waitFor(placeholder, 5_000).catch(() => term.screen())), "an empty prompt shows the placeholder");
  await term.keys(["x"], true);
  await term.waitFor((s) => lastLine(s) === ">>> x", 10_000);
  t.pass("typing replaces the placeholder");
  await term.keys(["BSpace"]);
  t.ok(placeholder(await term.waitFor(placeholder, 5_000).catch(() => term.screen())), "an emptied line shows it again");

  const help = await command(term, "/?");
  t.match(help, /^ {2}\/load <model> +Load a session or model$/m);
  t.match(help, /^ {2}\/save <model> +Save your current session$/m);
  t.match(help, /^ {2}\/\? shortcuts +Help for keyboard shortcuts$/m);
  const setHelp = await command(term, "/? set");
  for (const sub of ["history", "nohistory", "wordwrap", "nowordwrap", "think", "nothink"]) {
    t.match(setHelp, new RegExp(`^ {2}/set ${sub} +\\S`, "m"), `/? set lists /set ${sub}`);
  }

  await term.keys(["C-d"]);
  t.ok(await waitUntil(async () => (await term.exitStatus()) !== undefined, 15_000), "Ctrl+D ends the session");
  t.equal(await term.exitStatus(), 0);
  const screen = lines(await term.screen());
  t.ok(screen.includes("shell$"), `the shell prompt starts a line of its own:\n${screen.slice(-4).join("\n")}`);
  t.notOk(screen.some((l) => l.startsWith(">>>") && l.includes("shell$")), "not after the >>> prompt");
});

t.test("/show parameters lists the model's parameters, then the user defined ones", { skip: terminalSkip }, async (t) => {
  const term = await session(t);
  t.equal(await command(term, "/set parameter temperature 0.5"), "Set parameter 'temperature' to '0.5'");
  t.equal(await command(term, "/set parameter stop <a> <b>"), "Set parameter 'stop' to '<a>, <b>'");
  t.equal(
    await command(term, "/show parameters"),
    [
      "Model defined parameters:",
      `  ${"num_predict".padEnd(30)} 12`,
      `  ${"seed".padEnd(30)} 7`,
      "",
      "User defined parameters:",
      `  ${"temperature".padEnd(30)} 0.5`,
      `  ${"stop".padEnd(30)} [<a> <b>]`,
      "",
    ].join("\n"),
  );
});

t.test("/set think and /set nothink set the request's think field", { skip: terminalSkip }, async (t) => {
  const term = await session(t);
  const think = await command(term, "/set think");
  t.match(think, /^warning: model "tiny" does not support thinking output$/m, "a model without thinking is named");
  t.match(think, /^Set 'think' mode\.$/m);
  // The daemon refuses think:true for a model without thinking: proof that the field was sent.
  t.match(await command(term, "hello", 120_000), /^Error: "tiny" does not support thinking$/m);
  t.match(await command(term, "/set think high"), /^Set 'think' mode to 'high'\.$/m);
  t.match(await command(term, "/set nothink"), /^Set 'nothink' mode\.$/m);
  const answer = await command(term, "hello", 120_000);
  t.notMatch(answer, /Error/, "think:false is accepted");
  t.match(answer, /\S/, "and answered");
});

t.test("/save makes a model of the session; /load switches to another model", { skip: terminalSkip }, async (t) => {
  const term = await session(t);
  await command(term, "/set system Be brief.");
  await command(term, "/set parameter temperature 0");
  const answer = await command(term, "hello", 120_000);
  t.match(answer, /\S/);
  t.equal(await command(term, "/save tiny-saved"), "Created new model 'tiny-saved'");
  t.match(await command(term, "/save bad/../name"), /^Error: .*invalid model name/m, "a bad name is the daemon's error; the session goes on");

  const shown = (await (await postJson(`${url}/api/show`, { model: "tiny-saved" })).json()) as { system?: string; parameters: string };
  t.equal(shown.system, "Be brief.", "the session's system message");
  t.match(shown.parameters, /^temperature +0$/m, "the session's parameters");
  t.match(shown.parameters, /^num_predict +12$/m, "merged with the model's own");
  const model = await daemon.app.services.store.resolve("tiny-saved");
  const layer = model.manifest.layers.find((l) => l.mediaType === "application/vnd.ollama.image.messages");
  t.ok(layer, "a messages layer");
  const messages = JSON.parse(layer ? await daemon.app.services.store.readBlobText(layer.digest) : "[]") as { role: string; content: string }[];
  t.same(messages.map((m) => m.role), ["user", "assistant"]);
  t.equal(messages[0]?.content, "hello");

  t.equal(await command(term, "/load nope"), "Loading model 'nope'\nCouldn't find model 'nope'");
  await command(term, "/set system Something else.");
  t.equal(await command(term, "/load tiny-saved", 120_000), "Loading model 'tiny-saved'");
  t.ok(daemon.app.services.scheduler.list().some((m) => m.model.display.startsWith("tiny-saved")), "the new model is loaded");
  t.equal(await command(term, "/show system"), "Be brief.", "the loaded model's system message, not the old session's");
  t.match(await command(term, "hi", 120_000), /\S/, "and it answers");
});

t.test("/set history saves the input history to ~/.lmd/history; /set nohistory stops saving", { skip: terminalSkip }, async (t) => {
  const home = await mkdtemp(path.join(os.tmpdir(), "lmd-home-"));
  t.teardown(() => rm(home, { recursive: true, force: true }));
  const file = path.join(home, ".lmd", "history");
  const saved = () => readFile(file, "utf8").catch(() => "");
  const term = await session(t, { home });
  await command(term, "/set verbose");
  t.ok(await waitUntil(async () => (await saved()).split("\n").includes("/set verbose"), 5000), "a line is saved");
  t.equal(await command(term, "/set nohistory"), "Set 'nohistory' mode.");
  await command(term, "/set quiet");
  t.notOk((await saved()).split("\n").includes("/set quiet"), "not saved while history is off");
  await term.keys(["Up"]);
  await term.waitFor((s) => lastLine(s) === ">>> /set quiet", 10_000);
  t.pass("the session still recalls it with the Up arrow");
  await term.keys(["C-u"]);
  t.equal(await command(term, "/set history"), "Set 'history' mode.");
  await command(term, "/set format json");
  t.ok(await waitUntil(async () => (await saved()).split("\n").includes("/set format json"), 5000), "saved again");
  t.same((await saved()).split("\n"), ["/set verbose", "/set nohistory", "/set format json", ""], "lines typed under nohistory are never written");
  await term.keys(["C-d"]);
  await waitUntil(async () => (await term.exitStatus()) !== undefined, 15_000);

  const next = await session(t, { home });
  await next.keys(["Up"]);
  await next.waitFor((s) => lastLine(s) === ">>> /set format json", 10_000);
  await next.keys(["Up"]);
  await next.waitFor((s) => lastLine(s) === ">>> /set nohistory", 10_000);
  t.pass("a new session starts with the saved history");
});

t.test("/set wordwrap wraps answers at the terminal's width without breaking words; /set nowordwrap does not", { skip: terminalSkip }, async (t) => {
  const term = await session(t);
  // Greedy and long: the same answer twice, long enough to pass the 120-column terminal's width.
  await command(term, "/set parameter temperature 0");
  await command(term, "/set parameter num_predict 200");
  t.equal(await command(term, "/set nowordwrap"), "Set 'nowordwrap' mode.");
  const plain = await command(term, "tell me a long story", 240_000);
  await command(term, "/clear");
  t.equal(await command(term, "/set wordwrap"), "Set 'wordwrap' mode.");
  const wrapped = await command(term, "tell me a long story", 240_000);

  // capture-pane -J joins the lines the terminal wrapped by itself, so a long line shows whole.
  t.ok(plain.split("\n").some((l) => [...l].length > 120), `without wordwrap a line runs past the width:\n${plain}`);
  const tooWide = wrapped.split("\n").filter((l) => [...l].length > 115);
  t.same(tooWide, [], "with wordwrap every line fits (width - 5, as Ollama)");
  t.ok(wrapped.split("\n").length > plain.split("\n").length, "wordwrap broke lines");
  t.equal(wrapped.replace(/\s+/g, " ").trim(), plain.replace(/\s+/g, " ").trim(), "the same words, none split or lost");
});
