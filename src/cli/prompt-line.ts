/**
 * What the `lmd run` prompt adds to node:readline, as Ollama's prompt has them: the dimmed
 * placeholder `Send a message (/? for help)` on an empty line, and the input history kept in
 * `~/.lmd/history` (Ollama's `~/.ollama/history`: the last 100 lines, rewritten after each line
 * while saving is on; `/set nohistory` stops the saving, not the Up arrow of the session).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type readline from "node:readline";

const GREY = "\x1b[38;5;245m";
const RESET = "\x1b[0m";
const CLEAR_TO_END = "\x1b[K";

/** Lines kept, as Ollama keeps. */
export const HISTORY_LIMIT = 100;

/**
 * The placeholder: written after the prompt with the cursor moved back to its start, so the first
 * key typed replaces it. Two keypress listeners frame readline's own: the one before clears the
 * placeholder, the one after shows it again when the line is empty (a backspace, a Ctrl+C).
 */
export class Placeholder {
  private shown = false;
  private active = false;

  constructor(
    private readonly rl: readline.Interface,
    private readonly input: NodeJS.ReadStream,
    private readonly output: NodeJS.WriteStream,
    private readonly text: string,
  ) {
    input.prependListener("keypress", this.beforeKey);
    input.on("keypress", this.afterKey);
    // A line entered (or the input ended): the prompt is no longer waiting, nothing to show.
    rl.on("line", this.stop);
    rl.on("close", this.stop);
  }

  /** Call after `rl.prompt()` on an empty line: shows the placeholder while the line stays empty. */
  prompt(): void {
    this.active = true;
    this.show();
  }

  /** Removes the keypress listeners. */
  detach(): void {
    this.input.off("keypress", this.beforeKey);
    this.input.off("keypress", this.afterKey);
  }

  private readonly stop = () => {
    this.active = false;
  };

  private readonly beforeKey = () => {
    if (!this.shown) return;
    this.output.write(CLEAR_TO_END);
    this.shown = false;
  };

  private readonly afterKey = () => {
    if (this.active && this.rl.line === "") this.show();
  };

  private show(): void {
    if (this.shown) return;
    this.output.write(`${GREY}${this.text}\x1b[${this.text.length}D${RESET}`);
    this.shown = true;
  }
}

/** The input history file, `~/.lmd/history`. */
export function historyFile(home = os.homedir()): string {
  return path.join(home, ".lmd", "history");
}

/**
 * The saved input history: the lines entered while saving was on, oldest first, as the file
 * holds them. Lines entered under `/set nohistory` are never written, not even later (Ollama
 * writes its whole in-memory list once saving is back on, those lines included).
 */
export class InputHistory {
  private readonly lines: string[];

  constructor(private readonly file: string) {
    this.lines = readLines(file).slice(-HISTORY_LIMIT);
  }

  /** The saved lines newest first, readline's `history` option. */
  newestFirst(): string[] {
    return [...this.lines].reverse();
  }

  /** Saves a line just entered (readline's 'history' event reports it first). */
  add(line: string | undefined): void {
    if (line === undefined || line.trim() === "") return;
    if (this.lines.at(-1) !== line) this.lines.push(line); // readline keeps no repeats in a row either
    if (this.lines.length > HISTORY_LIMIT) this.lines.splice(0, this.lines.length - HISTORY_LIMIT);
    writeLines(this.file, this.lines);
  }
}

/** Unreadable history is no reason to refuse a session: it reads as empty. */
function readLines(file: string): string[] {
  try {
    return fs.readFileSync(file, "utf8").split("\n").map((l) => l.trim()).filter((l) => l !== "");
  } catch {
    return [];
  }
}

/** Writes through a temporary file, so a crash never leaves half a history. */
function writeLines(file: string, lines: readonly string[]): void {
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
    const tmp = `${file}.tmp`;
    fs.writeFileSync(tmp, lines.map((l) => `${l}\n`).join(""), { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch {
    // A read-only or full home must not end the session; the history simply is not saved.
  }
}
