/**
 * The parser's token cursor and error reporting (parse.Tree's next/backup/peek/errorf/unexpected),
 * shared by the statement parser (parser.ts) and the pipeline parser (parse-pipeline.ts).
 */
import type { Node } from "./ast.js";
import type { Item, ItemType } from "./lexer.js";

/** Deepest nesting of blocks and parentheses accepted. */
export const MAX_NESTING = 500;

/** A parse error: Go's message, already prefixed `template: name:line:`. */
export class TemplateSyntaxError extends Error {}

/** Which function names exist: a call to anything else is a parse error, as in Go. */
export type FuncCheck = (name: string) => boolean;

const KEYWORD_ITEMS = new Set<ItemType>(["block", "break", "continue", "define", "else", "end", "if", "nil", "range", "template", "with"]);

export class TokenStream {
  i = 0;
  private furthest = 0;
  /** Variables in scope ("$" always). */
  vars: string[] = ["$"];
  rangeDepth = 0;
  /** Line of the action being parsed, for "... in action started at" errors. */
  actionLine = 0;
  private depth = 0;

  constructor(
    readonly name: string,
    readonly items: Item[],
    readonly hasFunction: FuncCheck,
  ) {}

  /** Throws Go's error, naming the line of the furthest token read. */
  fail(msg: string): never {
    const line = this.items[Math.min(this.furthest, this.items.length - 1)]!.line;
    throw new TemplateSyntaxError(`template: ${this.name}:${line}: ${msg}`);
  }

  next(): Item {
    const it = this.items[Math.min(this.i, this.items.length - 1)]!;
    this.i = Math.min(this.i + 1, this.items.length);
    this.furthest = Math.max(this.furthest, this.i - 1);
    return it;
  }

  backup(n = 1): void {
    this.i -= n;
  }

  peek(): Item {
    const it = this.next();
    this.backup();
    return it;
  }

  nextNonSpace(): Item {
    let it: Item;
    do it = this.next();
    while (it.type === "space");
    return it;
  }

  peekNonSpace(): Item {
    const it = this.nextNonSpace();
    this.backup();
    return it;
  }

  unexpected(it: Item, context: string): never {
    if (it.type === "error") {
      let extra = "";
      if (this.actionLine !== 0 && this.actionLine !== it.line) {
        extra = ` in action started at ${this.name}:${this.actionLine}`;
        if (it.val.endsWith(" action")) extra = extra.slice(" in action".length);
      }
      return this.fail(`${it.val}${extra}`);
    }
    return this.fail(`unexpected ${describe(it)} in ${context}`);
  }

  expect(type: ItemType, context: string): Item {
    const it = this.nextNonSpace();
    if (it.type !== type) this.unexpected(it, context);
    return it;
  }

  /**
   * Runs a nested parse. Nesting is recursion here; Go's growable stacks have no limit, a JS
   * stack does, so nesting beyond MAX_NESTING is a syntax error.
   */
  nest<T>(f: () => T): T {
    if (++this.depth > MAX_NESTING) this.fail(`template nested too deeply (more than ${MAX_NESTING} levels)`);
    try {
      return f();
    } finally {
      this.depth--;
    }
  }
}

/** An item as Go's item.String() prints it in errors. */
function describe(it: Item): string {
  if (it.type === "eof") return "EOF";
  if (it.type === "error") return it.val;
  if (KEYWORD_ITEMS.has(it.type)) return `<${it.val}>`;
  const chars = [...it.val];
  if (chars.length > 10) return `${goQuote(chars.slice(0, 10).join(""))}...`;
  return goQuote(it.val);
}

/** Go's %q of a string (strconv.Quote), close enough for error messages. */
export function goQuote(s: string): string {
  return JSON.stringify(s).replace(/\\u00([0-9a-f]{2})/g, "\\x$1");
}

/** parse.IsEmptyTree: only whitespace text. */
export function isEmptyTree(n: Node): boolean {
  if (n.type === "list") return n.nodes.every(isEmptyTree);
  if (n.type === "text") return n.text.trim() === "";
  return n.type === "comment";
}
