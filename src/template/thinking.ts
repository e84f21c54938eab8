/**
 * Thinking for Go-template models, as Ollama's `thinking/` package does it: the tags are inferred
 * from the template (the text around `.Thinking` inside `range .Messages`), and a streaming parser
 * splits the model's output into thinking and content.
 */
import type { ListNode, Node, RangeNode } from "./ast.js";

const isSpace = /^\s*/u;

/** Go's templateVisit: enter (false stops descending), children, exit. */
function visit(n: Node | null | undefined, enter: (n: Node) => boolean, exit?: (n: Node) => void): void {
  if (!n || !enter(n)) return;
  switch (n.type) {
    case "list": for (const c of n.nodes) visit(c, enter, exit); break;
    case "if": case "range": case "with":
      visit(n.pipe, enter, exit);
      visit(n.list, enter, exit);
      if (n.elseList) visit(n.elseList, enter, exit);
      break;
    case "action": visit(n.pipe, enter, exit); break;
    case "template": visit(n.pipe, enter, exit); break;
    case "pipe": for (const c of n.cmds) visit(c, enter, exit); break;
    case "command": for (const a of n.args) visit(a, enter, exit); break;
    default: break;
  }
  exit?.(n);
}

function rangeUsesField(r: RangeNode, field: string): boolean {
  let found = false;
  visit(r.pipe, (n) => {
    if (n.type === "field" && n.ident[0] === field) found = true;
    return true;
  });
  return found;
}

/** Ollama's thinking.InferTags: `["", ""]` when the template shows no thoughts. */
export function inferThinkingTags(root: ListNode): [string, string] {
  const ancestors: Node[] = [];
  let opening = "";
  let closing = "";
  visit(
    root,
    (n) => {
      ancestors.push(n);
      if (n.type !== "field" || n.ident[0] !== "Thinking") return true;
      const range = [...ancestors].reverse().find((a): a is RangeNode => a.type === "range");
      if (!range || !rangeUsesField(range, "Messages")) return true;
      const list = [...ancestors].reverse().find((a): a is ListNode => a.type === "list");
      if (list) {
        const first = list.nodes[0];
        const last = list.nodes[list.nodes.length - 1];
        if (first?.type === "text") opening = first.text.trim();
        if (last?.type === "text") closing = last.text.trim();
      }
      return true;
    },
    () => void ancestors.pop(),
  );
  return [opening, closing];
}

type State = "looking" | "startedEatingSpace" | "thinking" | "doneEatingSpace" | "done";

/** Longest suffix of `s` that is a prefix of `delim`. */
export function overlap(s: string, delim: string): number {
  for (let i = Math.min(delim.length, s.length); i > 0; i--) if (s.endsWith(delim.slice(0, i))) return i;
  return 0;
}

/** Ollama's thinking.Parser: feed output chunks, get back `[thinking, content]` ready to send. */
export class ThinkingParser {
  private state: State = "looking";
  private acc = "";

  constructor(readonly opening: string, readonly closing: string) {}

  add(content: string): [string, string] {
    this.acc += content;
    let thinking = "";
    let remaining = "";
    for (;;) {
      const [t, r, more] = this.eat();
      thinking += t;
      remaining += r;
      if (!more) return [thinking, remaining];
    }
  }

  private eat(): [string, string, boolean] {
    switch (this.state) {
      case "looking": {
        const trimmed = this.acc.replace(isSpace, "");
        if (trimmed.startsWith(this.opening)) {
          const after = trimmed.split(this.opening).slice(1).join(this.opening).replace(isSpace, "");
          this.acc = after;
          this.state = after === "" ? "startedEatingSpace" : "thinking";
          return ["", "", true];
        }
        if (this.opening.startsWith(trimmed)) return ["", "", false]; // a partial tag, or only spaces so far
        this.state = "done";
        const untrimmed = this.acc;
        this.acc = "";
        return ["", untrimmed, false];
      }
      case "startedEatingSpace": {
        const trimmed = this.acc.replace(isSpace, "");
        this.acc = "";
        if (trimmed === "") return ["", "", false];
        this.state = "thinking";
        this.acc = trimmed;
        return ["", "", true];
      }
      case "thinking": {
        const acc = this.acc;
        if (acc.includes(this.closing)) {
          const [thinking = "", ...rest] = acc.split(this.closing);
          const remaining = rest.join(this.closing).replace(isSpace, "");
          this.acc = "";
          this.state = remaining === "" ? "doneEatingSpace" : "done";
          return [thinking, remaining, false];
        }
        const n = overlap(acc, this.closing);
        this.acc = n > 0 ? acc.slice(acc.length - n) : "";
        return [acc.slice(0, acc.length - n), "", false];
      }
      case "doneEatingSpace": {
        const trimmed = this.acc.replace(isSpace, "");
        this.acc = "";
        if (trimmed !== "") this.state = "done";
        return ["", trimmed, false];
      }
      case "done": {
        const acc = this.acc;
        this.acc = "";
        return ["", acc, false];
      }
    }
  }
}
