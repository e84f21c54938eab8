/**
 * OpenAI's harmony format (gpt-oss), read from a model's output as Ollama reads it (its `harmony`
 * package): messages `<|start|>HEADER<|message|>BODY<|end|>` whose header names a channel —
 * `analysis` is the thought, `final` (or no channel, or `commentary` without a recipient) is the
 * answer, and a header with a recipient (`to=functions.NAME`) is a tool call whose body is its JSON
 * arguments. Ollama uses it for a model whose family is gpt-oss and whose Go template writes
 * `<|start|>` and `<|end|>` (server/routes.go `shouldUseHarmony`), or whose config names the
 * `harmony` parser. Facts from Ollama's source; the code is lmd's own.
 *
 * As in Ollama: the output begins inside an assistant header (the prompt ends with
 * `<|start|>assistant`), or inside a message the conversation's last assistant turn prefilled; text
 * outside any message is dropped; a body is handed out as it comes except a tail that may begin
 * `<|end|>`; a tool call's arguments are read when the output ends (one call per answer, the
 * accumulated bodies of every recipient message); tool names are written to the template as
 * TypeScript identifiers and mapped back.
 */
import { HttpError } from "../errors.js";

const START = "<|start|>";
const HEADER_END = "<|message|>";
const END = "<|end|>";
const CHANNEL = "<|channel|>";
const CONSTRAIN = "<|constrain|>";

/** The special tokens harmony's tags are made of: the runner writes these as text (Ollama: PreservedTokens). */
export const HARMONY_TAGS = [START, END, HEADER_END, CHANNEL, CONSTRAIN] as const;

/** Ollama's rule: the gpt-oss family with a template that writes harmony's tags, or the `harmony` parser named in the config. */
export function usesHarmony(model: { template: string | undefined; family: string; parser: string }): boolean {
  if (model.parser === "harmony") return true;
  return (
    (model.family === "gptoss" || model.family === "gpt-oss") && model.template !== undefined && model.template.includes(START) && model.template.includes(END)
  );
}

export interface HarmonyHeader {
  role: string;
  channel: string;
  recipient: string;
}

/** A header's role, channel and recipient (`assistant<|channel|>commentary to=functions.f <|constrain|>json`). */
export function parseHeader(raw: string): HarmonyHeader {
  let rest = raw.includes(CONSTRAIN) ? raw.replace(CONSTRAIN, ` ${CONSTRAIN}`).trim() : raw;
  let channel = "";
  const at = rest.indexOf(CHANNEL);
  if (at !== -1) {
    const after = rest.slice(at + CHANNEL.length);
    const space = after.search(/\s/u);
    channel = space === -1 ? after : after.slice(0, space);
    rest = (rest.slice(0, at) + after.slice(channel.length)).trim();
  }
  const fields = rest.split(/\s+/u).filter(Boolean);
  const first = fields[0] ?? "";
  if (first.startsWith("to=")) return { role: "tool", channel, recipient: first.slice(3) };
  const second = fields[1];
  return { role: first, channel, recipient: second?.startsWith("to=") ? second.slice(3) : "" };
}

/** The longest tail of `s` that is a start of `tag`. */
function overlap(s: string, tag: string): number {
  for (let n = Math.min(s.length, tag.length); n > 0; n--) if (s.endsWith(tag.slice(0, n))) return n;
  return 0;
}

const BUILT_IN_TOOLS = new Set(["browser.open", "browser.search", "browser.find", "python"]);

/** Tool names as harmony writes them (TypeScript identifiers), and back. */
export class FunctionNames {
  private readonly toHarmony = new Map<string, string>();
  private readonly toUser = new Map<string, string>();

  /** The name the template shows for `name` (the same for the built-in tools); a second equal one gets `_2`, … */
  add(name: string): string {
    const base = identifier(name);
    let candidate = base;
    for (let n = 2; this.toUser.has(candidate); n++) candidate = `${base}_${n}`;
    if (BUILT_IN_TOOLS.has(name)) candidate = name;
    this.toHarmony.set(name, candidate);
    this.toUser.set(candidate, name);
    return candidate;
  }

  /** The user's name for a name the model wrote (itself when it names no tool given). */
  original(name: string): string {
    return this.toUser.get(name) ?? name;
  }
}

/** Spaces, `-` and `.` become `_`; letters, digits, `_` and `$` stay; the rest goes; never empty, never a leading digit. */
function identifier(name: string): string {
  const kept = name.replace(/[ .-]/gu, "_").replace(/[^\p{L}\p{Nd}_$]/gu, "");
  if (kept === "") return "unnamed";
  return /^[0-9]/u.test(kept) ? `_${kept}` : kept;
}

/** The last message of a conversation, as far as the prefill goes. */
export interface LastMessage {
  role: string;
  content?: string | undefined;
  thinking?: string | undefined;
}

export interface HarmonyParsed {
  thinking: string;
  content: string;
  calls: { name: string; arguments: Record<string, unknown> }[];
}

type Sink = "content" | "thinking" | "tool";

/** One answer's output, parsed as it streams. */
export class HarmonyOutput {
  readonly names = new FunctionNames();
  private buf: string;
  private state: "start" | "header" | "body" = "start";
  private sink: Sink = "content";
  private toolName: string | undefined;
  private toolArgs = "";

  /** `last`: the conversation's last message (chat), whose assistant content or thinking the prompt left open. */
  constructor(last?: LastMessage) {
    if (last?.role === "assistant" && last.content) this.buf = `${START}assistant${CHANNEL}final${HEADER_END}`;
    else if (last?.role === "assistant" && last.thinking) this.buf = `${START}assistant${CHANNEL}analysis${HEADER_END}`;
    else this.buf = `${START}assistant`;
  }

  /**
   * A constrained answer (`format`): the prompt opens the final channel, so the grammar's text is
   * the answer rather than a message header. Returns what the prompt needs appended (nothing when
   * the last turn already left the answer open; the thought it left open is closed first, as
   * Ollama's second pass for structured outputs does). Before any `add`.
   */
  openFinal(): string {
    const final = `${START}assistant${CHANNEL}final${HEADER_END}`;
    const opened = this.buf;
    this.buf = final;
    if (opened === final) return "";
    return opened === `${START}assistant` ? `${CHANNEL}final${HEADER_END}` : `${END}${final}`;
  }

  add(text: string): HarmonyParsed {
    this.buf += text;
    const out: HarmonyParsed = { thinking: "", content: "", calls: [] };
    for (;;) {
      if (this.state === "start") {
        const at = this.buf.indexOf(START);
        if (at === -1) break;
        this.buf = this.buf.slice(at + START.length); // text before a message is dropped
        this.state = "header";
      } else if (this.state === "header") {
        const at = this.buf.indexOf(HEADER_END);
        if (at === -1) break;
        this.open(parseHeader(this.buf.slice(0, at)));
        this.buf = this.buf.slice(at + HEADER_END.length);
        this.state = "body";
      } else {
        const at = this.buf.indexOf(END);
        if (at !== -1) {
          this.write(out, this.buf.slice(0, at));
          this.buf = this.buf.slice(at + END.length);
          this.state = "start";
          this.sink = "content";
          continue;
        }
        const keep = overlap(this.buf, END);
        this.write(out, this.buf.slice(0, this.buf.length - keep));
        this.buf = this.buf.slice(this.buf.length - keep);
        break;
      }
    }
    return out;
  }

  /** The output ended: the tool call, if a message had a recipient (arguments that are not a JSON object: a 500, as Ollama). */
  end(): HarmonyParsed {
    const out: HarmonyParsed = { thinking: "", content: "", calls: [] };
    if (this.toolName === undefined) return out;
    const name = this.names.original(this.toolName.startsWith("functions.") ? this.toolName.slice("functions.".length) : this.toolName);
    let args: unknown;
    try {
      args = JSON.parse(this.toolArgs);
      if (args !== null && (typeof args !== "object" || Array.isArray(args))) throw new Error("the arguments are not a JSON object");
    } catch (err) {
      throw new HttpError(500, `error parsing tool call: raw='${this.toolArgs}', err=${(err as Error).message}`);
    }
    out.calls.push({ name, arguments: (args ?? {}) as Record<string, unknown> });
    return out;
  }

  private open(h: HarmonyHeader): void {
    if ((h.channel === "analysis" || h.channel === "commentary") && h.recipient !== "") {
      this.sink = "tool";
      this.toolName = h.recipient;
    } else if (h.channel === "analysis") this.sink = "thinking";
    else if (h.channel === "commentary" || h.channel === "final") this.sink = "content";
    // Any other channel, or none, keeps the sink it had (Ollama's state is left as it was).
  }

  private write(out: HarmonyParsed, text: string): void {
    if (text === "") return;
    if (this.sink === "content") out.content += text;
    else if (this.sink === "thinking") out.thinking += text;
    else this.toolArgs += text;
  }
}
