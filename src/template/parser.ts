/**
 * The parser of Go's text/template (text/template/parse/parse.go), ported function by function so
 * its errors read as Go's do: `template: <name>:<line>: <message>`. This file holds the statements
 * (text, actions, if/range/with, define/template/block, break/continue); parse-pipeline.ts what is
 * inside an action.
 */
import type { BranchFields, ListNode, Node, PipeNode, TemplateNode } from "./ast.js";
import { lex, type Item } from "./lexer.js";
import { unquote } from "./literals.js";
import { pipeline } from "./parse-pipeline.js";
import { goQuote, isEmptyTree, TokenStream, type FuncCheck } from "./parse-state.js";

export { TemplateSyntaxError, MAX_NESTING, isEmptyTree, goQuote, type FuncCheck } from "./parse-state.js";

type Else = { type: "else"; pos: number; line: number };
type End = { type: "end"; pos: number };
type Parsed = Node | Else | End;

export interface ParseResult {
  root: ListNode;
  /** Every tree by name, the main one included. */
  defined: Map<string, ListNode>;
}

/** Parses `text` named `name` into its main tree and the trees it defines. */
export function parse(name: string, text: string, hasFunction: FuncCheck): ParseResult {
  const p = new StatementParser(new TokenStream(name, lex(text), hasFunction));
  return p.parse(name);
}

const describeParsed = (n: Parsed): string => (n.type === "end" ? "{{end}}" : n.type === "else" ? "{{else}}" : n.type);
const list = (pos: number): ListNode => ({ type: "list", pos, nodes: [] });

class StatementParser {
  private readonly trees = new Map<string, ListNode>();

  constructor(private readonly ts: TokenStream) {}

  /** parse.Tree.parse: the top level, where {{define}} may appear. */
  parse(name: string): ParseResult {
    const ts = this.ts;
    const root = list(ts.peek().pos);
    while (ts.peek().type !== "eof") {
      if (ts.peek().type === "leftDelim") {
        const at = ts.i;
        ts.next();
        if (ts.nextNonSpace().type === "define") {
          this.definition();
          continue;
        }
        ts.i = at;
      }
      const n = this.textOrAction();
      if (n.type === "end" || n.type === "else") ts.fail(`unexpected ${describeParsed(n)}`);
      root.nodes.push(n as Node);
    }
    this.add(name, root);
    return { root: this.trees.get(name)!, defined: this.trees };
  }

  /** Registers a finished tree; an empty body never replaces a non-empty one (parse.Tree.add). */
  private add(treeName: string, root: ListNode): void {
    const old = this.trees.get(treeName);
    if (!old || isEmptyTree(old)) this.trees.set(treeName, root);
    else if (!isEmptyTree(root)) this.ts.fail(`template: multiple definition of template ${goQuote(treeName)}`);
  }

  private itemList(): [ListNode, Parsed] {
    const l = list(this.ts.peekNonSpace().pos);
    while (this.ts.peekNonSpace().type !== "eof") {
      const n = this.textOrAction();
      if (n.type === "end" || n.type === "else") return [l, n];
      l.nodes.push(n);
    }
    return this.ts.fail("unexpected EOF");
  }

  private textOrAction(): Parsed {
    const it = this.ts.nextNonSpace();
    if (it.type === "text") return { type: "text", pos: it.pos, text: it.val };
    if (it.type === "leftDelim") {
      this.ts.actionLine = it.line;
      try {
        return this.action();
      } finally {
        this.ts.actionLine = 0;
      }
    }
    return this.ts.unexpected(it, "input");
  }

  private action(): Parsed {
    const ts = this.ts;
    const it = ts.nextNonSpace();
    switch (it.type) {
      case "block":
        return this.block();
      case "break":
      case "continue":
        return this.loopControl(it);
      case "else":
        return this.elseControl();
      case "end":
        return { type: "end", pos: ts.expect("rightDelim", "end").pos };
      case "if":
      case "range":
      case "with": {
        const context = it.type;
        return { type: context, ...ts.nest(() => this.control(context)) } as Node;
      }
      case "template":
        return this.templateCall();
    }
    ts.backup();
    const tok = ts.peek();
    return { type: "action", pos: tok.pos, line: tok.line, pipe: pipeline(ts, "command", "rightDelim") };
  }

  private loopControl(kw: Item): Parsed {
    const it = this.ts.nextNonSpace();
    if (it.type !== "rightDelim") this.ts.unexpected(it, `{{${kw.val}}}`);
    if (this.ts.rangeDepth === 0) this.ts.fail(`{{${kw.val}}} outside {{range}}`);
    return { type: kw.type as "break" | "continue", pos: kw.pos, line: kw.line };
  }

  private elseControl(): Parsed {
    const p = this.ts.peekNonSpace();
    // "{{else if" and "{{else with" leave the keyword pending for control().
    if (p.type === "if" || p.type === "with") return { type: "else", pos: p.pos, line: p.line };
    const it = this.ts.expect("rightDelim", "else");
    return { type: "else", pos: it.pos, line: it.line };
  }

  /** parseControl: the pipeline, the body, and an else branch; variables declared end with it. */
  private control(context: "if" | "range" | "with"): BranchFields {
    const ts = this.ts;
    const mark = ts.vars.length;
    try {
      const pipe = pipeline(ts, context, "rightDelim");
      if (context === "range") ts.rangeDepth++;
      const [body, next1] = this.itemList();
      if (context === "range") ts.rangeDepth--;
      let elseList: ListNode | null = null;
      if (next1.type === "else") {
        const kw = ts.peek().type;
        if ((context === "if" && kw === "if") || (context === "with" && kw === "with")) {
          // {{if a}}_{{else if b}}_{{end}} is {{if a}}_{{else}}{{if b}}_{{end}}{{end}}.
          ts.next();
          elseList = list(next1.pos);
          elseList.nodes.push({ type: context, ...ts.nest(() => this.control(context)) } as Node);
        } else {
          const [el, next2] = this.itemList();
          if (next2.type !== "end") ts.fail(`expected end; found ${describeParsed(next2)}`);
          elseList = el;
        }
      }
      return { pos: pipe.pos, line: pipe.line, pipe, list: body, elseList };
    } finally {
      ts.vars = ts.vars.slice(0, mark);
    }
  }

  private templateName(it: Item, context: string): string {
    if (it.type !== "string" && it.type !== "rawString") return this.ts.unexpected(it, context);
    try {
      return unquote(it.val);
    } catch (e) {
      return this.ts.fail((e as Error).message);
    }
  }

  private templateCall(): TemplateNode {
    const ts = this.ts;
    const it = ts.nextNonSpace();
    const tname = this.templateName(it, "template clause");
    let pipe: PipeNode | null = null;
    if (ts.nextNonSpace().type !== "rightDelim") {
      ts.backup();
      pipe = pipeline(ts, "template clause", "rightDelim");
    }
    return { type: "template", pos: it.pos, line: it.line, name: tname, pipe };
  }

  /** A body parsed as its own tree: fresh variables, outside any range. */
  private body(context: string): ListNode {
    const ts = this.ts;
    const saved = { vars: ts.vars, rangeDepth: ts.rangeDepth };
    ts.vars = ["$"];
    ts.rangeDepth = 0;
    const [body, end] = ts.nest(() => this.itemList());
    if (end.type !== "end") ts.fail(`unexpected ${describeParsed(end)} in ${context}`);
    ts.vars = saved.vars;
    ts.rangeDepth = saved.rangeDepth;
    return body;
  }

  private block(): TemplateNode {
    const it = this.ts.nextNonSpace();
    const tname = this.templateName(it, "block clause");
    const pipe = pipeline(this.ts, "block clause", "rightDelim");
    this.add(tname, this.body("block clause"));
    return { type: "template", pos: it.pos, line: it.line, name: tname, pipe };
  }

  private definition(): void {
    const tname = this.templateName(this.ts.nextNonSpace(), "define clause");
    this.ts.expect("rightDelim", "define clause");
    this.add(tname, this.body("define clause"));
  }
}
