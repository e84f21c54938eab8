/**
 * Tool calls in the output of Go-template models, parsed as Ollama's `tools/` package does: the
 * call "tag" is the first text inside the template's `{{ if .ToolCalls }}` section (`<tool_call>`,
 * `[TOOL_CALLS]`, ...), or `{` (bare JSON) when there is none. Content before the tag streams; a
 * partial tag at the end of a chunk is held back until it is decided.
 */
import type { IfNode, ListNode, Node, TextNode } from "./ast.js";
import { overlap } from "./thinking.js";

export interface ParsedToolCall {
  index: number;
  name: string;
  arguments: Record<string, unknown>;
}

type Branch = { list: ListNode; elseList: ListNode | null };

function isToolCallsIf(n: IfNode): boolean {
  return n.pipe.cmds.some((c) => c.args.some((a) => a.type === "field" && a.ident.includes("ToolCalls")));
}

function findToolCallNode(nodes: Node[]): IfNode | undefined {
  for (const n of nodes) {
    if (n.type === "if" && isToolCallsIf(n)) return n;
    if (n.type === "list") {
      const r = findToolCallNode(n.nodes);
      if (r) return r;
    } else if (n.type === "if" || n.type === "range" || n.type === "with") {
      const b = n as Branch;
      const r = findToolCallNode(b.list.nodes) ?? (b.elseList ? findToolCallNode(b.elseList.nodes) : undefined);
      if (r) return r;
    }
  }
  return undefined;
}

function findTextNode(nodes: Node[]): TextNode | undefined {
  for (const n of nodes) {
    if (n.type === "text") {
      if (n.text.trim() === "") continue;
      return n;
    }
    if (n.type === "list") {
      const r = findTextNode(n.nodes);
      if (r) return r;
    } else if (n.type === "if" || n.type === "range" || n.type === "with") {
      const b = n as Branch;
      return findTextNode(b.list.nodes) ?? (b.elseList ? findTextNode(b.elseList.nodes) : undefined);
    } else if (n.type === "action") return undefined;
  }
  return undefined;
}

/** Ollama's parseTag: the text that opens a tool call in this template's output. */
export function toolCallTag(root: ListNode): string {
  const tc = findToolCallNode(root.nodes);
  const tn = tc && findTextNode(tc.list.nodes);
  if (!tn) return "{";
  const tag = (tn.text.replaceAll("\r\n", "\n").split("{")[0] ?? "").trim();
  return tag === "" ? "{" : tag;
}

/** Ollama's tools.Parser over one response; `add` returns the calls completed and content to send. */
export class ToolCallParser {
  private state: "looking" | "calling" | "done" = "looking";
  private buffer = "";
  private n = 0;

  constructor(readonly tag: string, private readonly names: string[]) {}

  add(s: string): { calls: ParsedToolCall[]; content: string } {
    if (this.state === "done") return { calls: [], content: s };
    this.buffer += s;
    let content = "";
    if (this.state === "looking") {
      const [i, found] = this.findTag();
      if (i === -1) {
        content = this.buffer;
        this.buffer = "";
      } else {
        content = this.buffer.slice(0, i);
        this.buffer = this.buffer.slice(i);
      }
      // With `{` or `[` as the tag, only an answer that starts with the call is a call.
      if ((this.tag === "{" || this.tag === "[") && content.trim() !== "") {
        this.state = "done";
        const all = content + this.buffer;
        this.buffer = "";
        return { calls: [], content: all };
      }
      if (!found) return { calls: [], content };
      this.state = "calling";
    }
    const calls: ParsedToolCall[] = [];
    for (let call = this.parseCall(); call; call = this.parseCall()) calls.push(call);
    if (this.done()) {
      this.state = "done";
      content = this.buffer;
      this.buffer = "";
    }
    return { calls, content };
  }

  /** What is left to send when the output ends: unparsed text, unless it was a call. */
  content(): string {
    if (this.n > 0) return "";
    return this.tag === "{" || this.tag === "[" ? this.buffer : "";
  }

  private findTag(): [number, boolean] {
    const i = this.buffer.indexOf(this.tag);
    if (i > -1) return [i, true];
    const n = overlap(this.buffer, this.tag);
    return n > 0 ? [this.buffer.length - n, false] : [-1, false];
  }

  private parseCall(): ParsedToolCall | undefined {
    const [name, nameEnd] = findTool(this.names, this.buffer);
    if (name === undefined) return undefined;
    const found = findArguments(name, this.buffer);
    if (!found) return undefined;
    const end = Math.max(nameEnd, found[1]);
    this.buffer = this.buffer.slice(end);
    return { index: this.n++, name, arguments: found[0] };
  }

  private done(): boolean {
    const pair = this.tag === "{" ? "{}" : this.tag === "[" ? "[]" : undefined;
    if (!pair) return false;
    let count = 0;
    let inString = false;
    let escaped = false;
    for (const c of this.buffer) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = !inString;
      else if (!inString && c === pair[0]) count++;
      else if (!inString && c === pair[1] && --count === 0) return true;
    }
    return false;
  }
}

/** The earliest (then longest) tool name in `buf`; none while `buf` ends in a partial name. */
function findTool(names: string[], buf: string): [string | undefined, number] {
  if (buf === "") return [undefined, 0];
  const longest = Math.max(0, ...names.map((n) => n.length));
  for (let i = 1; i <= Math.min(buf.length, longest); i++) {
    const tail = buf.slice(buf.length - i);
    if (names.some((n) => tail.length < n.length && n.startsWith(tail))) return [undefined, 0];
  }
  let found: string | undefined;
  let start = -1;
  for (const name of names) {
    const pos = buf.indexOf(name);
    if (pos === -1) continue;
    if (start !== -1 && (pos > start || (pos === start && name.length <= (found?.length ?? 0)))) continue;
    found = name;
    start = pos;
  }
  return found === undefined ? [undefined, 0] : [found, start + found.length];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The first JSON object in `buffer` that holds the arguments (Ollama's findArguments), and where it ends. */
function findArguments(name: string, buffer: string): [Obj, number] | undefined {
  let start = -1;
  let braces = 0;
  let inString = false;
  let escaped = false;
  for (let i = 0; i < buffer.length; i++) {
    const c = buffer[i];
    if (escaped) { escaped = false; continue; }
    if (c === "\\") { escaped = true; continue; }
    if (c === '"') { inString = !inString; continue; }
    if (inString) continue;
    if (c === "{") {
      if (braces === 0) start = i;
      braces++;
    } else if (c === "}") {
      braces--;
      if (braces === 0 && start !== -1) {
        let data: unknown;
        try {
          data = JSON.parse(buffer.slice(start, i + 1));
        } catch {
          start = -1;
          continue;
        }
        if (!isObj(data)) { start = -1; continue; }
        const args = findObject(name, data);
        return [args === undefined ? data : (args ?? {}), i];
      }
      if (braces < 0) braces = 0;
    }
  }
  return undefined;
}

/** undefined: not found; null: a `name` object without arguments (Go's nil map: no arguments). */
function findObject(tool: string, obj: Obj): Obj | null | undefined {
  const findMap = (key: string): Obj | undefined => {
    const v = obj[key];
    if (isObj(v)) return v;
    if (typeof v === "string") {
      try {
        const parsed = JSON.parse(v) as unknown;
        if (isObj(parsed)) return parsed;
      } catch { /* not JSON: not the arguments */ }
    }
    return undefined;
  };
  if ("name" in obj) return findMap("arguments") ?? findMap("parameters") ?? null;
  const direct = findMap(tool);
  if (direct) return direct;
  for (const v of Object.values(obj)) {
    const children = Array.isArray(v) ? v : [v];
    for (const child of children) {
      if (!isObj(child)) continue;
      const r = findObject(tool, child);
      if (r !== undefined) return r;
    }
  }
  return undefined;
}
