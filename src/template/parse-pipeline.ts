/**
 * Pipelines, commands and operands (parse.go's pipeline/command/operand/term): what sits between
 * `{{` and `}}` once the keyword, if any, is read.
 */
import type { ArgNode, CommandNode, PipeNode, VariableNode } from "./ast.js";
import type { ItemType } from "./lexer.js";
import { parseNumber, unquote } from "./literals.js";
import { goQuote, type TokenStream } from "./parse-state.js";

/** A pipeline ending at `end`, with optional `$x :=`/`$x =` (and range's `$i, $v :=`) declarations. */
export function pipeline(ts: TokenStream, context: string, end: ItemType): PipeNode {
  const first = ts.peekNonSpace();
  const pipe: PipeNode = { type: "pipe", pos: first.pos, line: first.line, isAssign: false, decl: [], cmds: [] };
  for (;;) {
    const v = ts.peekNonSpace();
    if (v.type !== "variable") break;
    const at = ts.i;
    while (ts.items[ts.i] !== v) ts.i++;
    ts.next();
    const nx = ts.peekNonSpace();
    if (nx.type === "assign" || nx.type === "declare") {
      pipe.isAssign = nx.type === "assign";
      ts.nextNonSpace();
      pipe.decl.push(variable(v.pos, v.val));
      ts.vars.push(v.val);
      break;
    }
    if (nx.type === "char" && nx.val === ",") {
      ts.nextNonSpace();
      pipe.decl.push(variable(v.pos, v.val));
      ts.vars.push(v.val);
      if (context === "range" && pipe.decl.length < 2) {
        const t = ts.peekNonSpace().type;
        if (t === "variable" || t === "rightDelim" || t === "rightParen") continue;
        ts.fail("range can only initialize variables");
      }
      ts.fail(`too many declarations in ${context}`);
    }
    // `$x` is an operand, not a declaration: put it back.
    ts.i = at;
    break;
  }
  for (;;) {
    const it = ts.nextNonSpace();
    if (it.type === end) {
      checkPipeline(ts, pipe, context);
      return pipe;
    }
    switch (it.type) {
      case "bool": case "charConstant": case "dot": case "field": case "identifier": case "number":
      case "nil": case "rawString": case "string": case "variable": case "leftParen":
        ts.backup();
        pipe.cmds.push(command(ts));
        break;
      default:
        ts.unexpected(it, context);
    }
  }
}

function checkPipeline(ts: TokenStream, pipe: PipeNode, context: string): void {
  if (pipe.cmds.length === 0) ts.fail(`missing value for ${context}`);
  pipe.cmds.slice(1).forEach((c, k) => {
    const t = c.args[0]!.type;
    if (t === "bool" || t === "dot" || t === "nil" || t === "number" || t === "string") ts.fail(`non executable command in pipeline stage ${k + 2}`);
  });
}

function command(ts: TokenStream): CommandNode {
  const cmd: CommandNode = { type: "command", pos: ts.peekNonSpace().pos, args: [] };
  for (;;) {
    ts.peekNonSpace();
    const op = operand(ts);
    if (op) cmd.args.push(op);
    const it = ts.next();
    if (it.type === "space") continue;
    if (it.type === "rightDelim" || it.type === "rightParen") ts.backup();
    else if (it.type !== "pipe") ts.unexpected(it, "operand");
    break;
  }
  if (cmd.args.length === 0) ts.fail("empty command");
  return cmd;
}

/** A term and the fields after it: `.A.B`, `$x.A`, `(pipe).A`. */
function operand(ts: TokenStream): ArgNode | null {
  const node = term(ts);
  if (!node) return null;
  if (ts.peek().type !== "field") return node;
  const fields: string[] = [];
  const pos = ts.peek().pos;
  while (ts.peek().type === "field") fields.push(ts.next().val.slice(1));
  switch (node.type) {
    case "field":
      return { type: "field", pos, ident: [...node.ident, ...fields] };
    case "variable":
      return { type: "variable", pos, ident: [...node.ident, ...fields] };
    case "bool": case "string": case "number": case "nil": case "dot":
      return ts.fail(`unexpected . after term ${goQuote(termString(node))}`);
    default:
      return { type: "chain", pos, node, field: fields };
  }
}

function term(ts: TokenStream): ArgNode | null {
  const it = ts.nextNonSpace();
  const literal = <T>(f: () => T): T => {
    try {
      return f();
    } catch (e) {
      return ts.fail((e as Error).message);
    }
  };
  switch (it.type) {
    case "identifier":
      if (!ts.hasFunction(it.val)) ts.fail(`function ${goQuote(it.val)} not defined`);
      return { type: "identifier", pos: it.pos, ident: it.val };
    case "dot":
      return { type: "dot", pos: it.pos };
    case "nil":
      return { type: "nil", pos: it.pos };
    case "variable": {
      const v = variable(it.pos, it.val);
      if (!ts.vars.includes(v.ident[0]!)) ts.fail(`undefined variable ${goQuote(v.ident[0]!)}`);
      return v;
    }
    case "field":
      return { type: "field", pos: it.pos, ident: it.val.slice(1).split(".") };
    case "bool":
      return { type: "bool", pos: it.pos, value: it.val === "true" };
    case "charConstant":
    case "number":
      return literal(() => parseNumber(it.pos, it.val, it.type === "charConstant"));
    case "leftParen":
      return ts.nest(() => pipeline(ts, "parenthesized pipeline", "rightParen"));
    case "string":
    case "rawString":
      return literal(() => ({ type: "string" as const, pos: it.pos, quoted: it.val, text: unquote(it.val) }));
  }
  ts.backup();
  return null;
}

export function variable(pos: number, text: string): VariableNode {
  return { type: "variable", pos, ident: text.split(".") };
}

function termString(n: ArgNode): string {
  switch (n.type) {
    case "bool": return String(n.value);
    case "string": return n.quoted;
    case "number": return n.text;
    case "nil": return "nil";
    default: return ".";
  }
}
