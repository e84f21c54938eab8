/**
 * The interactive session of `lmd run`: `>>> ` prompt with Ollama's dimmed placeholder, `"""`
 * multi-line input, slash commands (repl-commands.ts), streamed answers (word-wrapped, thinking
 * shown dimmed), the input history in ~/.lmd/history, and Ctrl+C that stops the current answer
 * without leaving.
 *
 * Ctrl+C is handled two ways on purpose. At the prompt, readline owns the terminal (raw mode) and
 * reports ^C as its 'SIGINT' event. While an answer streams, readline is paused and the terminal
 * is put back in cooked mode, so ^C becomes a real SIGINT, which aborts the request; the daemon
 * sees the connection close and frees the slot.
 */
import readline from "node:readline";
import { ClientError } from "../api/client.js";
import { command, type ReplState } from "./repl-commands.js";
import { HISTORY_LIMIT, historyFile, InputHistory, Placeholder } from "./prompt-line.js";
import { formatStats, type Session } from "./session.js";
import { WordWrap } from "./wordwrap.js";

export type { ReplState } from "./repl-commands.js";

const PLACEHOLDER = "Send a message (/? for help)";
const GREY = "\x1b[38;5;245m";
const BOLD = "\x1b[1m";
const RESET = "\x1b[0m";

/** Runs the session until `/bye` or end of input (Ctrl+D). */
export async function repl(session: Session, state: ReplState): Promise<void> {
  await session.load();
  const history = new InputHistory(historyFile());
  const rl = readline.createInterface({
    input: process.stdin,
    output: process.stdout,
    terminal: true,
    history: history.newestFirst(),
    historySize: HISTORY_LIMIT,
  });
  // Like Ollama, the history file is rewritten after every line while saving is on.
  rl.on("history", (lines: string[]) => {
    if (state.history) history.add(lines[0]);
  });
  const placeholder = new Placeholder(rl, process.stdin, process.stdout, PLACEHOLDER);
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
      const input = await readMessage(rl, lines, placeholder);
      if (input === undefined) {
        // Ctrl+D / end of input: end the prompt's line, so the shell's prompt starts a line of its own.
        process.stdout.write("\n");
        return;
      }
      const text = input.trim();
      if (text === "") continue;
      if (text.startsWith("/")) {
        if (await command(session, state, text)) return;
        continue;
      }
      await answer(rl, session, state, input);
    }
  } finally {
    placeholder.detach();
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
async function readMessage(rl: readline.Interface, next: () => Promise<string | undefined>, placeholder: Placeholder): Promise<string | undefined> {
  rl.setPrompt(">>> ");
  rl.prompt();
  placeholder.prompt();
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
  const view = answerView(state);
  try {
    const result = await session.send(prompt, view.output, ac.signal);
    view.end(result.text !== "");
    if (state.verbose && result.stats) process.stderr.write(formatStats(result.stats) + "\n");
  } catch (err) {
    view.fail();
    if (!(err instanceof ClientError)) throw err;
    process.stderr.write(`Error: ${err.message}\n`);
  } finally {
    process.off("SIGINT", onSigint);
    if (process.stdin.isTTY) process.stdin.setRawMode(true);
    rl.resume();
  }
}

/**
 * How an answer is written: word-wrapped when wordwrap is on; the model's thinking, when it
 * thinks, dimmed between `Thinking...` and `...done thinking.` (Ollama's layout).
 */
function answerView(state: ReplState) {
  const wrap = new WordWrap(() => process.stdout.columns || 80);
  let last = "";
  let thinking = false;
  const write = (text: string) => {
    if (text === "") return;
    last = text;
    process.stdout.write(state.wordWrap ? wrap.wrap(text) : text);
  };
  const endThinking = () => {
    if (!thinking) return;
    thinking = false;
    process.stdout.write(`${last.endsWith("\n") ? "" : "\n"}${GREY}${BOLD}...done thinking.${RESET}\n\n`);
    last = "\n";
    wrap.reset();
  };
  return {
    output: {
      text: (text: string) => {
        endThinking();
        write(text);
      },
      thinking: (text: string) => {
        if (!thinking) {
          thinking = true;
          process.stdout.write(`${GREY}${BOLD}Thinking...${RESET}${GREY}\n`);
          wrap.reset();
        }
        write(text);
      },
    },
    /** Like Ollama: end the answer's line, then one blank line before the next prompt. */
    end(answered: boolean) {
      const thought = thinking;
      endThinking();
      process.stdout.write(`${RESET}${(answered || thought) && !last.endsWith("\n") ? "\n\n" : "\n"}`);
    },
    /** A failed turn: back to the normal colour, on a fresh line if anything was written. */
    fail() {
      thinking = false;
      process.stdout.write(`${RESET}${last !== "" && !last.endsWith("\n") ? "\n" : ""}`);
    },
  };
}
