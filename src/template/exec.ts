/**
 * The statements of Go's text/template (text/template/exec.go's walk): text, actions, if/with,
 * range, template calls, break/continue. Every execution is bounded: steps, output size, template
 * call depth and a deadline, so a hostile template errors instead of holding the event loop.
 */
import type { Node, RangeNode } from "./ast.js";
import { Budget, LimitError, type ExecLimits } from "./budget.js";
import { BREAK, CONTINUE, Evaluator, TemplateExecError, type Scope } from "./eval.js";
import { nodeString } from "./node-string.js";
import { compareStrings, formatValue, goType, isTrue, kindOf, mapKeys } from "./values.js";

export { TemplateExecError } from "./eval.js";
export { Budget, type ExecLimits } from "./budget.js";

/** Go allows 100000 nested template calls; JS stacks are smaller, and no real template nests deeply. */
const MAX_DEPTH = 1000;

/** Runs `root`; `limits` may be a Budget shared by several executions (one per turn of a legacy template). */
export function execute(scope: Scope, root: Node, data: unknown, limits: ExecLimits | Budget = {}): string {
  const s = new State(scope, limits instanceof Budget ? limits : new Budget(limits));
  s.vars.push({ name: "$", value: data });
  try {
    s.walk(data, root);
  } catch (e) {
    if (e === BREAK || e === CONTINUE) throw new TemplateExecError(`template: ${scope.name}: break or continue outside range`);
    throw e;
  }
  return s.out.join("");
}

class State extends Evaluator {
  out: string[] = [];
  private depth = 0;

  constructor(scope: Scope, budget: Budget) {
    super(scope, budget);
  }

  private write(text: string): void {
    try {
      this.budget.write(text.length);
      this.budget.spend(text.length);
    } catch (e) {
      if (e instanceof LimitError) this.errorf(e.message);
      throw e;
    }
    this.out.push(text);
  }

  walk(dot: unknown, node: Node): void {
    this.tick();
    this.at(node);
    switch (node.type) {
      case "action": {
        const val = this.evalPipeline(dot, node.pipe);
        if (node.pipe.decl.length === 0) this.printValue(node, val);
        return;
      }
      case "break": throw BREAK;
      case "continue": throw CONTINUE;
      case "comment": return;
      case "if": case "with": {
        const mark = this.vars.length;
        const val = this.evalPipeline(dot, node.pipe);
        if (isTrue(val)) this.walk(node.type === "with" ? val : dot, node.list);
        else if (node.elseList) this.walk(dot, node.elseList);
        this.vars.length = mark;
        return;
      }
      case "list":
        for (const n of node.nodes) this.walk(dot, n);
        return;
      case "range": return this.walkRange(dot, node);
      case "template": {
        const tree = this.scope.defined.get(node.name);
        if (!tree) this.errorf(`template ${JSON.stringify(node.name)} not defined`);
        if (this.depth >= MAX_DEPTH) this.errorf(`exceeded maximum template depth (${MAX_DEPTH})`);
        const newDot = node.pipe ? this.evalPipeline(dot, node.pipe) : undefined;
        const saved = { vars: this.vars, name: this.tmplName };
        // No dynamic scoping: the called template sees only $ = its dot.
        this.vars = [{ name: "$", value: newDot }];
        this.tmplName = node.name;
        this.depth++;
        try {
          this.walk(newDot, tree);
        } finally {
          this.depth--;
          this.vars = saved.vars;
          this.tmplName = saved.name;
        }
        return;
      }
      case "text":
        this.write(node.text);
        return;
      default:
        this.errorf(`unknown node: ${nodeString(node)}`);
    }
  }

  protected walkRange(dot: unknown, r: RangeNode): void {
    this.at(r);
    const mark = this.vars.length;
    const val = this.evalPipeline(dot, r.pipe);
    const inner = this.vars.length;
    const decl = r.pipe.decl;
    const one = (index: unknown, elem: unknown): boolean => {
      this.at(r);
      this.tick();
      if (decl.length > 0) {
        if (r.pipe.isAssign) this.setVar(decl[0]!.ident[0]!, decl.length > 1 ? index : elem);
        else this.vars[this.vars.length - 1]!.value = elem;
      }
      if (decl.length > 1) {
        if (r.pipe.isAssign) this.setVar(decl[1]!.ident[0]!, elem);
        else this.vars[this.vars.length - 2]!.value = index;
      }
      try {
        this.walk(elem, r.list);
      } catch (e) {
        if (e === BREAK) return false;
        if (e !== CONTINUE) throw e;
      } finally {
        this.vars.length = inner;
      }
      return true;
    };
    let ran = false;
    switch (kindOf(val)) {
      case "slice": {
        const arr = goType(val)?.nil ? [] : (val as unknown[]);
        for (let i = 0; i < arr.length; i++) {
          ran = true;
          if (!one(BigInt(i), arr[i])) break;
        }
        break;
      }
      case "map": {
        const obj = val as Record<string, unknown>;
        for (const k of mapKeys(obj).sort(compareStrings)) {
          ran = true;
          if (!one(k, obj[k])) break;
        }
        break;
      }
      case "int": {
        if (decl.length > 1) this.errorf(`can't use ${String(val)} to iterate over more than one variable`);
        for (let i = 0n; i < (val as bigint); i++) {
          ran = true;
          if (!one(i, i)) break;
        }
        break;
      }
      case "invalid":
        break;
      default:
        this.errorf(`range can't iterate over ${formatValue(val)}`);
    }
    this.vars.length = inner;
    if (!ran && r.elseList) this.walk(dot, r.elseList);
    this.vars.length = mark;
  }

  protected printValue(n: Node, v: unknown): void {
    this.at(n);
    if (kindOf(v) === "func") this.errorf(`can't print ${nodeString(n)} of type func`);
    this.write(v === undefined || v === null ? "<no value>" : formatValue(v));
  }
}
