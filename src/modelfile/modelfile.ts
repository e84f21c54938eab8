/**
 * Modelfiles (Ollama's format): `FROM`, `PARAMETER`, `TEMPLATE`, `SYSTEM`, `MESSAGE`, `LICENSE`,
 * `ADAPTER`, and lmd's `DRAFT <model>` (a draft model for speculative decoding, kept as the
 * parameter `draft`); commands are case-insensitive, `#` starts a comment line, and a value may be bare
 * (rest of the line), `"quoted"` (with `\"` escapes) or `"""triple-quoted"""` across lines.
 *
 * A leaf: the CLI parses with it (`lmd create`) and `/api/show` may print with `formatModelfile`.
 */

export type ParameterValue = string | number | boolean;

export interface ModelfileMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** A parsed Modelfile, in the shape of `/api/create`'s fields. */
export interface Modelfile {
  /** A model name or a path to a GGUF file (or a directory). */
  from: string;
  adapters: string[];
  template?: string;
  /** Ollama's RENDERER and PARSER: the names of its built-in prompt renderer and output parser. */
  renderer?: string;
  parser?: string;
  system?: string;
  /** Typed values; `stop` collects every occurrence into an array. */
  parameters: Record<string, ParameterValue | ParameterValue[]>;
  messages: ModelfileMessage[];
  license: string[];
}

/** A Modelfile mistake, with its line number. */
export class ModelfileError extends Error {
  constructor(message: string, readonly line?: number) {
    super(line === undefined ? message : `line ${line}: ${message}`);
    this.name = "ModelfileError";
  }
}

type Kind = "int" | "float" | "bool" | "string" | "list";

/** Parameters Ollama knows, with their types (a value of another type is an error). */
const PARAMETER_KINDS: Record<string, Kind> = {
  num_keep: "int", seed: "int", num_predict: "int", top_k: "int", top_p: "float", min_p: "float",
  typical_p: "float", repeat_last_n: "int", temperature: "float", repeat_penalty: "float",
  presence_penalty: "float", frequency_penalty: "float", penalize_newline: "bool", stop: "list",
  num_ctx: "int", num_batch: "int", num_gpu: "int", main_gpu: "int", use_mmap: "bool", num_thread: "int",
  mirostat: "int", mirostat_tau: "float", mirostat_eta: "float", tfs_z: "float", low_vram: "bool",
  use_mlock: "bool", numa: "bool", f16_kv: "bool", vocab_only: "bool", logits_all: "bool",
  // lmd: speculative decoding (DRAFT <model> sets `draft`).
  draft: "string", prompt_lookup: "bool", speculative: "bool", draft_p_min: "float", draft_num_predict: "int",
};

/** In the order of Ollama's message for an unknown one. */
const COMMANDS = ["from", "license", "template", "system", "adapter", "draft", "renderer", "parser", "parameter", "message"] as const;
const COMMAND_LIST = `${COMMANDS.slice(0, -1).map((c) => `"${c}"`).join(", ")}, or "${COMMANDS.at(-1)}"`;
const ROLES = ["system", "user", "assistant"] as const;

/** Parses Modelfile text. Throws ModelfileError naming the line of a mistake. */
export function parseModelfile(text: string): Modelfile {
  const out: Modelfile = { from: "", adapters: [], parameters: {}, messages: [], license: [] };
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = (lines[i] ?? "").trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^(\S+)(?:\s+([\s\S]*))?$/.exec(line);
    const command = (m?.[1] ?? "").toLowerCase();
    if (!(COMMANDS as readonly string[]).includes(command)) {
      throw new ModelfileError(`command must be one of ${COMMAND_LIST}`, lineNo);
    }
    let rest = m?.[2] ?? "";
    let name: string | undefined;
    if (command === "parameter" || command === "message") {
      const split = /^(\S+)\s+([\s\S]*)$/.exec(rest);
      if (!split) throw new ModelfileError(`${command.toUpperCase()} needs a name and a value`, lineNo);
      name = split[1] ?? "";
      rest = split[2] ?? "";
    }
    const { value, consumed } = readValue(rest, lines, i, lineNo);
    i += consumed;
    apply(out, command, name, value, lineNo);
  }
  if (out.from === "") throw new ModelfileError("no FROM line");
  return out;
}

/** Reads a bare, quoted or triple-quoted value starting at `rest` (line `i`); `consumed` extra lines. */
function readValue(rest: string, lines: string[], i: number, lineNo: number): { value: string; consumed: number } {
  if (rest.startsWith('"""')) {
    let body = rest.slice(3);
    let consumed = 0;
    while (!body.includes('"""')) {
      consumed++;
      if (i + consumed >= lines.length) throw new ModelfileError('unterminated triple-quoted string (missing """)', lineNo);
      body += `\n${lines[i + consumed] ?? ""}`;
    }
    const end = body.indexOf('"""');
    if (body.slice(end + 3).trim() !== "") throw new ModelfileError('unexpected text after closing """', lineNo + consumed);
    return { value: body.slice(0, end), consumed };
  }
  if (rest.startsWith('"')) {
    const m = /^"((?:[^"\\]|\\.)*)"\s*$/.exec(rest);
    if (!m) throw new ModelfileError("unterminated quoted string", lineNo);
    return { value: (m[1] ?? "").replace(/\\(["\\])/g, "$1"), consumed: 0 };
  }
  return { value: rest.trim(), consumed: 0 };
}

function apply(out: Modelfile, command: string, name: string | undefined, value: string, lineNo: number): void {
  if (value === "" && command !== "system" && command !== "template") throw new ModelfileError(`${command.toUpperCase()} needs a value`, lineNo);
  switch (command) {
    case "from":
      out.from = value;
      return;
    case "adapter":
      out.adapters.push(value);
      return;
    case "template":
      out.template = value;
      return;
    case "system":
      out.system = value;
      return;
    case "license":
      out.license.push(value);
      return;
    case "message": {
      const role = (name ?? "").toLowerCase();
      if (!(ROLES as readonly string[]).includes(role)) throw new ModelfileError(`role must be one of "system", "user", or "assistant"`, lineNo);
      out.messages.push({ role: role as ModelfileMessage["role"], content: value });
      return;
    }
    case "parameter":
      setParameter(out.parameters, (name ?? "").toLowerCase(), value, lineNo);
      return;
    case "draft":
      out.parameters.draft = value;
      return;
    case "renderer":
      out.renderer = value;
      return;
    case "parser":
      out.parser = value;
  }
}

function setParameter(params: Modelfile["parameters"], name: string, value: string, lineNo: number): void {
  const kind = PARAMETER_KINDS[name];
  if (kind === undefined) throw new ModelfileError(`unknown parameter '${name}'`, lineNo);
  if (kind === "list") {
    const list = params[name];
    params[name] = Array.isArray(list) ? [...list, value] : [value];
    return;
  }
  params[name] = typedValue(name, kind, value, lineNo);
}

/**
 * A parameter value typed as its name requires (`/set parameter` in `lmd run` uses it too);
 * throws ModelfileError for an unknown name or a value of the wrong type. `stop` stays a string.
 */
export function typedParameter(name: string, value: string): ParameterValue {
  const kind = PARAMETER_KINDS[name.toLowerCase()];
  if (kind === undefined) throw new ModelfileError(`unknown parameter '${name}'`);
  return typedValue(name.toLowerCase(), kind === "list" ? "string" : kind, value, undefined);
}

function typedValue(name: string, kind: Kind, value: string, lineNo: number | undefined): ParameterValue {
  if (kind === "bool") {
    if (!/^(true|false)$/i.test(value)) throw new ModelfileError(`invalid bool value '${value}' for parameter '${name}'`, lineNo);
    return value.toLowerCase() === "true";
  }
  if (kind === "int" || kind === "float") {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || (kind === "int" && !Number.isInteger(n))) {
      throw new ModelfileError(`invalid ${kind} value '${value}' for parameter '${name}'`, lineNo);
    }
    return n;
  }
  return value;
}

/** Options of {@link formatModelfile}. */
export interface FormatOptions {
  /** Comment lines printed first (without `# `), e.g. `Modelfile generated by "lmd show"`. */
  header?: string[];
}

/**
 * Writes a Modelfile that {@link parseModelfile} reads back to the same value (as `/api/show`
 * and `lmd show --modelfile` print it). Multi-line or quote-holding values are triple-quoted.
 */
export function formatModelfile(m: Modelfile, options: FormatOptions = {}): string {
  const out: string[] = [];
  for (const h of options.header ?? []) out.push(`# ${h}`);
  if (out.length > 0) out.push("");
  out.push(`FROM ${m.from}`);
  for (const a of m.adapters) out.push(`ADAPTER ${a}`);
  if (m.template !== undefined) out.push(`TEMPLATE ${quote(m.template, true)}`);
  if (m.renderer) out.push(`RENDERER ${quote(m.renderer, false)}`);
  if (m.parser) out.push(`PARSER ${quote(m.parser, false)}`);
  if (m.system !== undefined) out.push(`SYSTEM ${quote(m.system, true)}`);
  if (typeof m.parameters.draft === "string") out.push(`DRAFT ${m.parameters.draft}`);
  for (const [name, value] of Object.entries(m.parameters)) {
    if (name === "draft") continue;
    for (const v of Array.isArray(value) ? value : [value]) out.push(`PARAMETER ${name} ${quote(String(v), false)}`);
  }
  for (const msg of m.messages) out.push(`MESSAGE ${msg.role} ${quote(msg.content, true)}`);
  for (const l of m.license) out.push(`LICENSE ${quote(l, true)}`);
  return `${out.join("\n")}\n`;
}

/** Triple-quotes values that a bare value cannot carry (newlines, edges with spaces or quotes). */
function quote(value: string, always: boolean): string {
  const bareSafe = !/[\n"]/.test(value) && value === value.trim() && value !== "";
  if (!always && bareSafe) return value;
  if (!value.includes('"""') && !value.endsWith('"')) return `"""${value}"""`;
  if (!value.includes("\n")) return `"${value.replace(/(["\\])/g, "\\$1")}"`;
  // A value holding both newlines and `"""` cannot be written; Ollama has the same limit.
  throw new ModelfileError('value holds both a newline and """; it cannot be written in a Modelfile');
}
