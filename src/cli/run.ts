/**
 * `lmd run MODEL [PROMPT]`: one answer when a prompt is given (arguments and/or piped stdin),
 * else an interactive session (repl.ts).
 */
import { text as readAll } from "node:stream/consumers";
import type { Format } from "../api/types.js";
import { parseBoolean } from "../config.js";
import { parseDuration } from "../units.js";
import { makeClient, out, runCommand, UsageError, type CommandSpec } from "./common.js";
import { repl } from "./repl.js";
import { formatStats, Session } from "./session.js";

export const spec: CommandSpec = {
  usage: "lmd run MODEL [PROMPT...] [--verbose] [--format json] [--keepalive DURATION] [--nowordwrap]",
  summary: "Run a model: answer one prompt, or chat interactively",
  minArgs: 1,
  options: {
    verbose: { type: "boolean" },
    format: { type: "string" },
    keepalive: { type: "string" },
    nowordwrap: { type: "boolean" },
  },
  optionHelp: [
    "    --verbose              print timings (tokens/s) after each answer",
    "    --format json          make the model answer in JSON",
    "    --keepalive DURATION   how long the model stays loaded afterwards (e.g. 10m, 1h, -1 = forever)",
    "    --nowordwrap           do not wrap words to the next line in an interactive session",
  ],
  examples: ['lmd run llama3.2', 'lmd run llama3.2 "Why is the sky blue?"', "cat notes.txt | lmd run llama3.2 'Summarise:'"],
};

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [model = "", ...words], values }) => {
    const format = values.format as string | undefined;
    if (format !== undefined && format !== "json") throw new UsageError(`unknown format '${format}' (only "json" is supported)`);
    const keepAlive = values.keepalive as string | undefined;
    if (keepAlive !== undefined && parseDuration(keepAlive) === undefined) throw new UsageError(`invalid --keepalive '${keepAlive}' (examples: 5m, 1h, -1)`);
    const client = makeClient();
    const session = new Session(client, model, { keepAlive, format: format as Format | undefined });
    const verbose = values.verbose === true;
    try {
      const piped = !process.stdin.isTTY ? (await readAll(process.stdin)).trim() : "";
      const prompt = [piped, words.join(" ")].filter((s) => s !== "").join(" ");
      if (prompt !== "" || !process.stdin.isTTY) return await oneShot(session, prompt, verbose);
      // As Ollama's OLLAMA_NOHISTORY: the input history is not saved to ~/.lmd/history.
      const noHistory = parseBoolean(process.env.LMD_NOHISTORY ?? process.env.OLLAMA_NOHISTORY ?? "") === true;
      await repl(session, { verbose, wordWrap: values.nowordwrap !== true, history: !noHistory });
    } finally {
      await client.close();
    }
  });
}

async function oneShot(session: Session, prompt: string, verbose: boolean): Promise<void> {
  let last = "";
  const pending: Promise<void>[] = [];
  const result = await session.send(prompt, (text) => {
    last = text;
    pending.push(out(text));
  });
  await Promise.all(pending);
  const ended = result.text === "" ? "" : last.endsWith("\n") ? "" : "\n";
  await out(ended);
  if (verbose && result.stats) process.stderr.write(`\n${formatStats(result.stats)}`);
}
