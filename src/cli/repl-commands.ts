/**
 * The slash commands of the `lmd run` session, with Ollama's names, messages and output:
 * `/set`, `/show`, `/load`, `/save`, `/clear`, `/?`, `/bye`.
 */
import { ClientError } from "../api/client.js";
import { typedParameter } from "../modelfile/modelfile.js";
import type { ShowResponse } from "./wire.js";
import { describe } from "./show.js";
import type { Session } from "./session.js";
import { HELP, PARAMETERS_HELP, SET_HELP, SHORTCUTS_HELP, SHOW_HELP } from "./repl-help.js";

/** What the session's commands change besides the Session itself. */
export interface ReplState {
  verbose: boolean;
  /** Wrap answers at the terminal's width (`/set wordwrap`). */
  wordWrap: boolean;
  /** Save the input history to ~/.lmd/history (`/set history`). */
  history: boolean;
}

const print = (text: string) => void process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);

/** The daemon's answer to a command, as the session prints it; other errors are bugs and propagate. */
function clientFailure(err: unknown): void {
  if (!(err instanceof ClientError)) throw err;
  process.stderr.write(`Error: ${err.message}\n`);
}

/** A slash command; true when the session should end. */
export async function command(session: Session, state: ReplState, text: string): Promise<boolean> {
  const [cmd = "", sub = "", ...rest] = text.split(/\s+/);
  switch (cmd.toLowerCase()) {
    case "/bye":
    case "/exit":
      return true;
    case "/?":
    case "/help":
      print(
        sub === "set" || sub === "/set"
          ? SET_HELP
          : sub === "show" || sub === "/show"
            ? SHOW_HELP
            : sub === "shortcuts" || sub === "shortcut"
              ? SHORTCUTS_HELP
              : HELP,
      );
      return false;
    case "/clear":
      session.clear();
      print("Cleared session context");
      return false;
    case "/set":
      await setCommand(session, state, sub, rest, text);
      return false;
    case "/show":
      await showCommand(session, sub);
      return false;
    case "/load":
      await loadCommand(session, sub, rest);
      return false;
    case "/save":
      await saveCommand(session, sub, rest);
      return false;
    default:
      print(`Unknown command '${cmd}'. Type /? for help`);
      return false;
  }
}

async function setCommand(session: Session, state: ReplState, sub: string, rest: string[], text: string): Promise<void> {
  switch (sub) {
    case "":
      return print(SET_HELP);
    case "parameter":
      return setParameter(session, rest);
    case "system":
      if (rest.length === 0) return print(SET_HELP);
      session.system = text.replace(/^\/set\s+system\s*/, "").replace(/^"""|"""$/g, "");
      return print("Set system message.");
    case "history":
    case "nohistory":
      // Ollama switches silently; a confirmation like the other toggles tells the user it took.
      state.history = sub === "history";
      return print(`Set '${sub}' mode.`);
    case "wordwrap":
    case "nowordwrap":
      state.wordWrap = sub === "wordwrap";
      return print(`Set '${sub}' mode.`);
    case "format":
      if (rest[0] !== "json") return print("Invalid or missing format. For 'json' mode use '/set format json'");
      session.format = "json";
      return print("Set format to 'json' mode.");
    case "noformat":
      session.format = undefined;
      return print("Disabled format.");
    case "verbose":
    case "quiet":
      state.verbose = sub === "verbose";
      return print(`Set '${sub}' mode.`);
    case "think":
    case "nothink": {
      const level = sub === "think" ? rest[0] : undefined;
      session.think = sub === "nothink" ? false : (level ?? true);
      await warnIfNoThinking(session);
      return print(level !== undefined ? `Set 'think' mode to '${level}'.` : `Set '${sub}' mode.`);
    }
    default:
      return print(`Unknown command '/set ${sub}'. Type /? for help`);
  }
}

function setParameter(session: Session, rest: string[]): void {
  const [name, ...value] = rest;
  if (name === undefined || value.length === 0) return print(PARAMETERS_HELP);
  try {
    const v = name === "stop" ? value : typedParameter(name, value.join(" "));
    session.options = { ...session.options, [name]: v };
    print(`Set parameter '${name}' to '${value.join(", ")}'`);
  } catch (err) {
    print(`Couldn't set parameter: ${(err as Error).message}`);
  }
}

/** Ollama's warning when thinking is switched for a model that cannot think. */
async function warnIfNoThinking(session: Session): Promise<void> {
  const info = await session.show().catch(() => undefined);
  if (info && !info.capabilities.includes("thinking")) process.stderr.write(`warning: model "${session.model}" does not support thinking output\n`);
}

async function showCommand(session: Session, sub: string): Promise<void> {
  const parts = ["info", "license", "modelfile", "parameters", "system", "template"];
  if (sub === "") return print(SHOW_HELP);
  if (!parts.includes(sub)) return print(`Unknown command '/show ${sub}'. Type /? for help`);
  // The Session owns the client; /show is rare enough to ask the daemon each time.
  let info: ShowResponse;
  try {
    info = await session.show();
  } catch (err) {
    return clientFailure(err);
  }
  switch (sub) {
    case "info":
      return print(describe(info));
    case "parameters":
      return print(parametersText(info.parameters, session.options));
    case "system": {
      const system = session.system ?? info.system;
      return print(system ? system.trimEnd() : "No system message was specified for this model.");
    }
    default: {
      const value = sub === "license" ? info.license : sub === "modelfile" ? info.modelfile : info.template;
      const none = sub === "license" ? "license" : sub === "template" ? "prompt template" : sub;
      return print(value ? value.trimEnd() : `No ${none} was specified for this model.`);
    }
  }
}

/** Ollama's `/show parameters`: the model's own, then those set in this session. */
export function parametersText(model: string, user: Record<string, unknown>): string {
  const lines = ["Model defined parameters:"];
  if (model.trim() === "") lines.push("  No additional parameters were specified for this model.");
  else lines.push(...model.trimEnd().split("\n").map((l) => `  ${l}`));
  lines.push("");
  const entries = Object.entries(user);
  if (entries.length > 0) {
    lines.push("User defined parameters:");
    // Go's %v: a list prints as [a b].
    for (const [k, v] of entries) lines.push(`  ${k.padEnd(30)} ${Array.isArray(v) ? `[${v.join(" ")}]` : String(v)}`);
    lines.push("");
  }
  return `${lines.join("\n")}\n`;
}

async function loadCommand(session: Session, name: string, rest: string[]): Promise<void> {
  if (name === "" || rest.length > 0) return print("Usage:\n  /load <modelname>");
  print(`Loading model '${name}'`);
  try {
    await session.switchModel(name);
  } catch (err) {
    if (err instanceof ClientError && err.status === 404) return print(`Couldn't find model '${name}'`);
    return clientFailure(err);
  }
}

async function saveCommand(session: Session, name: string, rest: string[]): Promise<void> {
  if (name === "" || rest.length > 0) return print("Usage:\n  /save <modelname>");
  try {
    await session.save(name);
  } catch (err) {
    return clientFailure(err);
  }
  print(`Created new model '${name}'`);
}
