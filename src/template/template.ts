/**
 * A parsed template: Go's `template.New(name).Option("missingkey=zero").Funcs(ollamaFuncs).Parse(text)`.
 * Parsing is linear in the input and bounded in size; execution is bounded in steps, output and time,
 * so a hostile template (a stored TEMPLATE layer, a request's `template`) errors instead of spinning.
 */
import { LRUCache } from "lru-cache";
import { BadRequestError } from "../errors.js";
import type { ListNode, Node } from "./ast.js";
import { type Budget, execute, TemplateExecError, type ExecLimits } from "./exec.js";
import { FUNCS } from "./funcs.js";
import { IdentifierError, identifiers } from "./walk.js";
import { parse, TemplateSyntaxError } from "./parser.js";

export { Budget, type ExecLimits } from "./exec.js";

/** Largest template source accepted (Ollama's real templates are a few KiB). */
export const MAX_TEMPLATE_BYTES = 1024 * 1024;

export interface Template {
  /** The name used in error messages (`template: <name>:<line>: ...`). */
  readonly name: string;
  /** The text as given. */
  readonly source: string;
  /** The main template's tree. */
  readonly root: ListNode;
  /** Every tree by name: the main one and those declared with `{{ define }}` / `{{ block }}`. */
  readonly defined: ReadonlyMap<string, ListNode>;
  /** How it was parsed (the same text parsed the same way gives the same template). */
  readonly options: { appendResponse?: boolean };
  /**
   * Runs the main template against `data`; throws BadRequestError on execution errors.
   * `limits` may be a Budget shared with other executions of one render.
   */
  execute(data: unknown, limits?: ExecLimits | Budget): string;
  /** Runs one subtree (for example the `.ToolCalls` section) against `data`. */
  executeNode(node: Node, data: unknown, limits?: ExecLimits | Budget): string;
  /** Ollama's Template.Vars(): lower-cased identifiers of fields and variables used anywhere. */
  vars(): Set<string>;
}

/**
 * Parses `text`; throws BadRequestError with Go's message (`template: name:line: ...`) on a syntax
 * error, and, as Ollama's template.Parse does, on a `{{ template "x" }}` without a pipeline.
 * Also as Ollama's Parse: a template that uses neither `.Messages` nor `.Response` gets a
 * `{{ .Response }}` action appended to its root (`appendResponse: false` parses as plain Go does).
 */
export function parseTemplate(text: string, name = "template", options: { appendResponse?: boolean } = {}): Template {
  // Every generate and chat parses its model's template: keep the last few parsed (they are immutable).
  const key = `${name}\0${options.appendResponse === false ? 0 : 1}\0${text}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const t = parseUncached(text, name, options);
  if (text.length <= CACHE_MAX_TEXT) cache.set(key, t);
  return t;
}

const CACHE_MAX_TEXT = 64 * 1024;
const cache = new LRUCache<string, Template>({ max: 32 });

function parseUncached(text: string, name: string, options: { appendResponse?: boolean }): Template {
  if (Buffer.byteLength(text, "utf8") > MAX_TEMPLATE_BYTES) throw new BadRequestError(`template: ${name}: template is larger than ${MAX_TEMPLATE_BYTES} bytes`);
  try {
    const { root, defined } = parse(name, text, (f) => FUNCS.has(f));
    const t = new ParsedTemplate(name, text, root, defined, options.appendResponse === false ? { appendResponse: false } : {});
    const vars = t.vars();
    if (options.appendResponse !== false && !vars.has("messages") && !vars.has("response")) {
      // As Ollama's Parse: a template that never prints the response gets `{{ .Response }}` appended.
      const pos = text.length;
      const field = { type: "field" as const, pos, ident: ["Response"] };
      root.nodes.push({
        type: "action",
        pos,
        line: 0,
        pipe: { type: "pipe", pos, line: 0, isAssign: false, decl: [], cmds: [{ type: "command", pos, args: [field] }] },
      });
      t.forgetVars();
    }
    return t;
  } catch (e) {
    if (e instanceof TemplateSyntaxError || e instanceof IdentifierError) throw new BadRequestError(e.message);
    throw e;
  }
}

class ParsedTemplate implements Template {
  private varsCache: Set<string> | undefined;

  constructor(
    readonly name: string,
    readonly source: string,
    readonly root: ListNode,
    readonly defined: ReadonlyMap<string, ListNode>,
    readonly options: { appendResponse?: boolean },
  ) {}

  execute(data: unknown, limits?: ExecLimits | Budget): string {
    return this.executeNode(this.root, data, limits);
  }

  executeNode(node: Node, data: unknown, limits?: ExecLimits | Budget): string {
    try {
      return execute({ name: this.name, source: this.source, defined: this.defined }, node, data, limits);
    } catch (e) {
      if (e instanceof TemplateExecError) throw new BadRequestError(e.message);
      throw e;
    }
  }

  forgetVars(): void {
    this.varsCache = undefined;
  }

  vars(): Set<string> {
    if (!this.varsCache) {
      const set = new Set<string>();
      for (const tree of this.defined.values()) for (const n of tree.nodes) for (const id of identifiers(n)) set.add(id.toLowerCase());
      this.varsCache = set;
    }
    return new Set(this.varsCache);
  }
}
