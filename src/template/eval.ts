/**
 * Expressions of Go's text/template (text/template/exec.go): pipelines, commands, fields, map keys,
 * variables, constants and function calls, with `missingkey=zero`, over the JS value model of
 * values.ts. exec.ts adds the statements (text, actions, if/range/with, template calls).
 */
import type { ArgNode, ChainNode, CommandNode, ListNode, Node, NumberNode, PipeNode, VariableNode } from "./ast.js";
import { type Budget, LimitError } from "./budget.js";
import { callFunction, FUNCS } from "./funcs.js";
import { nodeString } from "./node-string.js";
import { goType, kindOf, typeName } from "./values.js";

export { DEFAULT_LIMITS, type ExecLimits } from "./budget.js";

/** An execution error, with Go's message (`template: name:line:col: executing "name" at <...>: ...`). */
export class TemplateExecError extends Error {}

/** Thrown by {{break}} and {{continue}}, caught by the enclosing range. */
export const BREAK = Symbol("break");
export const CONTINUE = Symbol("continue");

/** The longest error message, in characters. */
const MAX_MESSAGE = 4096;

/** Marks "no final value from a previous pipeline stage" (Go's missingVal). */
const MISSING = Symbol("missing");
type Final = unknown;

export interface Scope {
  name: string;
  source: string;
  defined: ReadonlyMap<string, ListNode>;
}

export abstract class Evaluator {
  vars: { name: string; value: unknown }[] = [];
  protected node: Node | null = null;
  protected tmplName: string;

  protected constructor(
    protected readonly scope: Scope,
    protected readonly budget: Budget,
  ) {
    this.tmplName = scope.name;
  }

  errorf(msg: string): never {
    // A message can quote a value (a comparison's operand): keep the answer small.
    if (msg.length > MAX_MESSAGE) msg = `${msg.slice(0, MAX_MESSAGE)}...`;
    if (!this.node) throw new TemplateExecError(`template: ${this.tmplName}: ${msg}`);
    const pos = this.node.pos;
    const before = this.scope.source.slice(0, Math.max(0, pos));
    const nl = before.lastIndexOf("\n");
    const line = 1 + (before.match(/\n/g)?.length ?? 0);
    const col = Buffer.byteLength(nl < 0 ? before : before.slice(nl + 1));
    let ctx = nodeString(this.node);
    if (ctx.length > 40) ctx = `${ctx.slice(0, 40)}...`;
    throw new TemplateExecError(`template: ${this.scope.name}:${line}:${col}: executing ${JSON.stringify(this.tmplName)} at <${ctx}>: ${msg}`);
  }

  protected at(n: Node): void {
    this.node = n;
  }

  protected tick(): void {
    try {
      this.budget.step();
    } catch (e) {
      if (e instanceof LimitError) this.errorf(e.message);
      throw e;
    }
  }

  evalPipeline(dot: unknown, pipe: PipeNode): unknown {
    this.at(pipe);
    let value: unknown = MISSING;
    for (const cmd of pipe.cmds) {
      value = this.evalCommand(dot, cmd, value);
      // A nil interface{} (null) digs down to "no value" (undefined), as Go's evalPipeline does.
      if (value === null) value = undefined;
    }
    for (const v of pipe.decl) {
      if (pipe.isAssign) this.setVar(v.ident[0]!, value);
      else this.vars.push({ name: v.ident[0]!, value });
    }
    return value;
  }

  protected evalCommand(dot: unknown, cmd: CommandNode, final: Final): unknown {
    this.tick();
    const first = cmd.args[0]!;
    switch (first.type) {
      case "field": return this.evalFieldChain(dot, dot, first, first.ident, cmd.args, final);
      case "chain": return this.evalChain(dot, first, cmd.args, final);
      case "identifier": return this.evalFunction(dot, first.ident, cmd, final);
      case "pipe":
        this.notAFunction(cmd.args, final);
        return this.evalPipeline(dot, first);
      case "variable": return this.evalVariable(dot, first, cmd.args, final);
    }
    this.at(first);
    this.notAFunction(cmd.args, final);
    switch (first.type) {
      case "bool": return first.value;
      case "dot": return dot;
      case "nil": return this.errorf("nil is not a command");
      case "number": return this.idealConstant(first);
      case "string": return first.text;
    }
  }

  protected notAFunction(args: ArgNode[], final: Final): void {
    if (args.length > 1 || final !== MISSING) this.errorf(`can't give argument to non-function ${nodeString(args[0]!)}`);
  }

  protected idealConstant(n: NumberNode): unknown {
    this.at(n);
    if (n.isComplex) return this.errorf("complex constants are not supported");
    if (n.isFloat && !/^[+-]?0[xX]/.test(n.text) && !n.isChar && /[.eEpP]/.test(n.text)) return n.float;
    if (n.isInt) return n.int;
    return this.errorf(`${n.text} overflows int`);
  }

  protected evalChain(dot: unknown, chain: ChainNode, args: ArgNode[], final: Final): unknown {
    if (chain.node.type === "nil") this.errorf(`indirection through explicit nil in ${nodeString(chain)}`);
    const receiver = this.evalArg(dot, chain.node);
    return this.evalFieldChain(dot, receiver, chain, chain.field, args, final);
  }

  protected evalVariable(dot: unknown, v: VariableNode, args: ArgNode[], final: Final): unknown {
    this.at(v);
    const value = this.varValue(v.ident[0]!);
    if (v.ident.length === 1) {
      this.notAFunction(args, final);
      return value;
    }
    return this.evalFieldChain(dot, value, v, v.ident.slice(1), args, final);
  }

  protected evalFieldChain(dot: unknown, receiver: unknown, node: Node, ident: string[], args: ArgNode[], final: Final): unknown {
    this.at(node);
    let r = receiver;
    for (let i = 0; i < ident.length - 1; i++) r = this.evalField(ident[i]!, r, false);
    return this.evalField(ident[ident.length - 1]!, r, args.length > 1 || final !== MISSING);
  }

  protected evalField(name: string, receiver: unknown, hasArgs: boolean): unknown {
    if (receiver === undefined) return undefined; // missingkey=zero on an invalid value
    if (receiver === null) this.errorf(`nil pointer evaluating interface {}.${name}`);
    const t = goType(receiver);
    const method = t?.string && name === "String" ? t.string : t?.methods?.[name];
    if (method) {
      if (hasArgs) this.errorf(`wrong number of args for ${name}: want 0 got 1`);
      return method(receiver as never);
    }
    const kind = kindOf(receiver);
    if (kind === "struct") {
      if (t?.fields?.some((f) => f.name === name)) {
        if (hasArgs) this.errorf(`${name} has arguments but cannot be invoked as function`);
        return (receiver as Record<string, unknown>)[name];
      }
    } else if (kind === "map") {
      if (hasArgs) this.errorf(`${name} is not a method but has arguments`);
      const obj = receiver as Record<string, unknown>;
      if (!t?.nil && Object.hasOwn(obj, name)) return obj[name];
      // missingkey=zero: the element type's zero value; for interface{} elements a nil interface.
      return t?.elemZero ? t.elemZero() : null;
    }
    return this.errorf(`can't evaluate field ${name} in type ${typeName(receiver)}`);
  }

  protected evalFunction(dot: unknown, name: string, cmd: CommandNode, final: Final): unknown {
    this.at(cmd.args[0]!);
    const fn = FUNCS.get(name);
    if (!fn) return this.errorf(`${JSON.stringify(name)} is not a defined function`);
    const argNodes = cmd.args.slice(1);
    const evalArg = (n: ArgNode): unknown => this.evalArg(dot, n);
    try {
      return callFunction(fn, argNodes, evalArg, final === MISSING ? { present: false } : { present: true, value: final }, this.budget);
    } catch (e) {
      if (e instanceof TemplateExecError || e === BREAK || e === CONTINUE) throw e;
      this.at(cmd.args[0]!);
      return this.errorf((e as Error).message);
    }
  }

  protected evalArg(dot: unknown, n: ArgNode): unknown {
    this.at(n);
    switch (n.type) {
      case "dot": return dot;
      case "nil": return null;
      case "field": return this.evalFieldChain(dot, dot, n, n.ident, [n], MISSING);
      case "variable": return this.evalVariable(dot, n, [n], MISSING);
      case "pipe": return this.evalPipeline(dot, n);
      case "identifier": return this.evalFunction(dot, n.ident, { type: "command", pos: n.pos, args: [n] }, MISSING);
      case "chain": return this.evalChain(dot, n, [n], MISSING);
      case "bool": return n.value;
      case "number": return this.idealConstant(n);
      case "string": return n.text;
    }
  }

  protected varValue(name: string): unknown {
    for (let i = this.vars.length - 1; i >= 0; i--) if (this.vars[i]!.name === name) return this.vars[i]!.value;
    return this.errorf(`undefined variable: ${name}`);
  }

  protected setVar(name: string, value: unknown): void {
    for (let i = this.vars.length - 1; i >= 0; i--) {
      if (this.vars[i]!.name === name) {
        this.vars[i]!.value = value;
        return;
      }
    }
    this.errorf(`undefined variable: ${name}`);
  }
}

