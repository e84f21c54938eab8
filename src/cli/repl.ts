/**
 * The interactive session of `lmd run`: `>>> ` prompt, `"""` multi-line input, slash commands,
 * streamed answers, and Ctrl+C that stops the current answer without leaving.
 *
 * Ctrl+C is handled two ways on purpose. At the prompt, readline owns the terminal (raw mode) and
 * reports ^C as its 'SIGINT' event. While an answer streams, readline is paused and the terminal
 * is put back in cooked mode, so ^C becomes a real SIGINT, which aborts the request; the daemon
 * sees the connection close and frees the slot.
 */
import readline from "node:readline";
import { ClientError } from "../api/client.js";
import { typedParameter } from "../modelfile/modelfile.js";
import type { ShowResponse } from "./wire.js";
import { describe } from "./show.js";
import { formatStats, type Session } from "./session.js";

const HELP = `Available Commands:
  /set            Set session variables
  /show           Show model information
  /clear          Clear session context
  /bye            Exit
  /?, /help       Help for a command

Use """ to begin a multi-line message.
`;

const SET_HELP = `Available Commands:
  /set parameter ...     Set a parameter (e.g. /set parameter temperature 0.5)
  /set system <string>   Set the system message
  /set format json       Answer in JSON
  /set noformat          Answer in free text
  /set verbose           Show timings after each answer
  /set quiet             Do not show timings
`;

const SHOW_HELP = `Available Commands:
  /show info         Show details for this model
  /show license      Show the model's license
  /show modelfile    Show the Modelfile for this model
  /show parameters   Show parameters for this model
  /show system       Show the system message
  /show template     Show the prompt template
`;

interface ReplState {
  verbose: boolean;
}

/** Runs the session until `/bye` or end of input (Ctrl+D). */
export async function repl(session: Session, state: ReplState): Promise<void> {
  await session.load();
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout, terminal: true, historySize: 200 });
  const lines = lineQueue(rl);
  rl.on("SIGINT", () => {
    // Ollama's behaviour: ^C clears a typed line; on an empty line it says how to leave.
    if (rl.line === "") process.stdout.write("\nUse Ctrl + d or /bye to exit.\n");
    else process.stdout.write("^C\n");
    (rl as unknown as { line: string }).line = ""; // readline has no public "clear line"
    rl.prompt();
  });
  try {
    for (;;) {
      const input = await readMessage(rl, lines);
      if (input === undefined) return; // Ctrl+D / end of input
      const text = input.trim();
      if (text === "") continue;
      if (text.startsWith("/")) {
        if (await command(session, state, text)) return;
        continue;
      }
      await answer(rl, session, state, input);
    }
  } finally {
    rl.close();
  }
}

/** Lines as a queue that survives pauses; `undefined` once input ends. */
function lineQueue(rl: readline.Interface): () => Promise<string | undefined> {
  const queue: (string | undefined)[] = [];
  let waiter: ((line: string | undefined) => void) | undefined;
  const push = (line: string | undefined) => {
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w(line);
    } else queue.push(line);
  };
  rl.on("line", (l) => push(l));
  rl.on("close", () => push(undefined));
  return () => (queue.length > 0 ? Promise.resolve(queue.shift()) : new Promise((resolve) => (waiter = resolve)));
}

/** One message: a line, or a `"""` block spanning lines. */
async function readMessage(rl: readline.Interface, next: () => Promise<string | undefined>): Promise<string | undefined> {
  rl.setPrompt(">>> ");
  rl.prompt();
  const first = await next();
  if (first === undefined || !first.trimStart().startsWith('"""')) return first;
  let body = first.trimStart().slice(3);
  rl.setPrompt("... ");
  while (!body.trimEnd().endsWith('"""')) {
    rl.prompt();
    const line = await next();
    if (line === undefined) return undefined;
    body += `\n${line}`;
  }
  return body.trimEnd().slice(0, -3);
}

/** Streams one answer; Ctrl+C (a real SIGINT here) stops it and the session goes on. */
async function answer(rl: readline.Interface, session: Session, state: ReplState, prompt: string): Promise<void> {
  const ac = new AbortController();
  const onSigint = () => ac.abort();
  rl.pause();
  if (process.stdin.isTTY) process.stdin.setRawMode(false);
  process.on("SIGINT", onSigint);
  let last = "";
  try {
    const result = await session.send(prompt, (text) => {
      last = text;
      process.stdout.write(text);
    }, ac.signal);
    // Like Ollama: end the answer's line, then one blank line before the next prompt.
    process.stdout.write(result.text !== "" && !last.endsWith("\n") ? "\n\n" : "\n");
    if (state.verbose && result.stats) process.stderr.write(formatStats(result.stats) + "\n");
  } catch (err) {
    if (!(err instanceof ClientError)) throw err;
    process.stderr.write(`Error: ${err.message}\n`);
  } finally {
    process.off("SIGINT", onSigint);
    if (process.stdin.isTTY) process.stdin.setRawMode(true);
    rl.resume();
  }
}

/** A slash command; true when the session should end. */
async function command(session: Session, state: ReplState, text: string): Promise<boolean> {
  const [cmd = "", sub = "", ...rest] = text.split(/\s+/);
  switch (cmd.toLowerCase()) {
    case "/bye":
    case "/exit":
      return true;
    case "/?":
    case "/help":
      process.stdout.write(sub === "set" ? SET_HELP : sub === "show" ? SHOW_HELP : HELP);
      return false;
    case "/clear":
      session.clear();
      process.stdout.write("Cleared session context\n");
      return false;
    case "/set":
      setCommand(session, state, sub, rest, text);
      return false;
    case "/show":
      await showCommand(session, sub);
      return false;
    default:
      process.stdout.write(`Unknown command '${cmd}'. Type /? for help\n`);
      return false;
  }
}

function setCommand(session: Session, state: ReplState, sub: string, rest: string[], text: string): void {
  switch (sub) {
    case "parameter": {
      const [name, ...value] = rest;
      if (name === undefined || value.length === 0) return void process.stdout.write("Usage: /set parameter <name> <value>\n");
      try {
        const v = name === "stop" ? value : typedParameter(name, value.join(" "));
        session.options = { ...session.options, [name]: v };
        process.stdout.write(`Set parameter '${name}' to '${value.join(", ")}'\n`);
      } catch (err) {
        process.stdout.write(`Couldn't set parameter: ${(err as Error).message}\n`);
      }
      return;
    }
    case "system":
      session.system = text.replace(/^\/set\s+system\s*/, "").replace(/^"""|"""$/g, "");
      process.stdout.write("Set system message.\n");
      return;
    case "format":
      session.format = rest[0] === "json" ? "json" : session.format;
      process.stdout.write(rest[0] === "json" ? "Set format to 'json' mode.\n" : "Only /set format json is supported.\n");
      return;
    case "noformat":
      session.format = undefined;
      process.stdout.write("Disabled format.\n");
      return;
    case "verbose":
      state.verbose = true;
      process.stdout.write("Set 'verbose' mode.\n");
      return;
    case "quiet":
      state.verbose = false;
      process.stdout.write("Set 'quiet' mode.\n");
      return;
    default:
      process.stdout.write(SET_HELP);
  }
}

async function showCommand(session: Session, sub: string): Promise<void> {
  // The Session owns the client; /show is rare enough to ask the daemon each time.
  let info: ShowResponse;
  try {
    info = await session.show();
  } catch (err) {
    if (!(err instanceof ClientError)) throw err;
    return void process.stderr.write(`Error: ${err.message}\n`);
  }
  const parts: Record<string, string | undefined> = {
    license: info.license, modelfile: info.modelfile, parameters: info.parameters, system: session.system ?? info.system, template: info.template,
  };
  if (sub === "info" || sub === "") return void process.stdout.write(describe(info));
  if (!(sub in parts)) return void process.stdout.write(SHOW_HELP);
  const value = parts[sub];
  process.stdout.write(value ? `${value.trimEnd()}\n` : `No ${sub} was specified for this model.\n`);
}
