/**
 * How a model's prompt is made, as Ollama makes it: a model with a Go template (its template layer,
 * a Modelfile TEMPLATE, or generate's `template`) is rendered here in the daemon, and the runner
 * evaluates the text with its special tokens parsed; a model without one goes through its GGUF chat
 * template in the runner (node-llama-cpp). Output of Go-template models is split into thinking,
 * content and tool calls by Ollama's parsers (template/thinking.ts, template/tools.ts), or by its
 * harmony parser for gpt-oss (template/harmony.ts).
 */
import type { ChatTurn, ToolCallSpec, ToolSpec } from "../runner/types.js";
import { goTemplateOf } from "../store/store.js";
import { parseTemplate, type OllamaMessage, type Template } from "../template/index.js";
import { inferThinkingTags, ThinkingParser } from "../template/thinking.js";
import { toolCallTag, ToolCallParser } from "../template/tools.js";

const tags = new WeakMap<Template, { thinking: [string, string]; tool: string }>();

/** The parsed Go template a model's prompts are rendered with, if any (store.goTemplateOf). */
export function goTemplateIn(model: { template: string | undefined; renderer: string }): Template | undefined {
  const source = goTemplateOf(model);
  return source === undefined ? undefined : goTemplate(source);
}

/** The parsed Go template (400 naming the position on a syntax error). */
export function goTemplate(source: string): Template {
  return parseTemplate(source);
}

function tagsOf(t: Template): { thinking: [string, string]; tool: string } {
  let v = tags.get(t);
  if (!v) {
    v = { thinking: inferThinkingTags(t.root), tool: toolCallTag(t.root) };
    tags.set(t, v);
  }
  return v;
}

/** Ollama's thinking capability of a Go template: it shows `.Thinking` between tags. */
export function templateThinks(t: Template): boolean {
  const [open, close] = tagsOf(t).thinking;
  return open !== "" && close !== "";
}

/** Runner turns → the messages a template sees (tool calls with their arguments, tool names). */
export function toMessages(turns: readonly ChatTurn[]): OllamaMessage[] {
  return turns.map((t) => ({
    role: t.role,
    content: t.content,
    ...(t.toolCalls?.length
      ? { tool_calls: t.toolCalls.map((c, index) => ({ ...(c.id ? { id: c.id } : {}), function: { index, name: c.name, arguments: c.arguments } })) }
      : {}),
    ...(t.toolName ? { tool_name: t.toolName } : {}),
    ...(t.toolCallId ? { tool_call_id: t.toolCallId } : {}),
    ...(t.thinking ? { thinking: t.thinking } : {}),
  }));
}

/** Tools as Ollama's API carries them (`{type: "function", function: {...}}`), for `.Tools`. */
export function toApiTools(tools: readonly ToolSpec[] | undefined): unknown[] | undefined {
  if (!tools?.length) return undefined;
  return tools.map((t) => ({
    type: "function",
    function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), ...(t.parameters ? { parameters: t.parameters } : {}) },
  }));
}

/** What one piece of model output turned into. */
export interface Parsed {
  thinking: string;
  content: string;
  calls: ToolCallSpec[];
}

/** Splits one generation's output: `add` each chunk, then `end` once. */
export interface OutputParser {
  add(text: string): Parsed;
  end(): Parsed;
}

/**
 * The output of one Go-template generation, split as Ollama's handlers split it: the thinking
 * parser first (when thinking is on and the template has tags), then the tool-call parser (when
 * the request has tools). Feed chunks with `add`, then `end` once. A GGUF chat template's
 * generation on /api/generate (evaluated without LlamaChat) is split by the thought tags the
 * runner reported (`thoughts` of its load info) instead of a Go template's.
 */
export class OutputSplitter implements OutputParser {
  private readonly thinking: ThinkingParser | undefined;
  private readonly tools: ToolCallParser | undefined;

  constructor(t: Template | { open: string; close: string }, opts: { think: boolean; tools?: readonly ToolSpec[] | undefined; prompt: string }) {
    const { thinking: [open, close], tool } = "open" in t ? { thinking: [t.open, t.close], tool: "" } : tagsOf(t);
    if (opts.think && open && close) {
      this.thinking = new ThinkingParser(open, close);
      // The prompt already opened the thought (the template ends with the tag): the output is inside it.
      if (opts.prompt.trim().endsWith(open)) this.thinking.add(open);
    }
    if (opts.tools?.length) this.tools = new ToolCallParser(tool, opts.tools.map((x) => x.name));
  }

  add(text: string): Parsed {
    let thinking = "";
    let content = text;
    if (this.thinking) [thinking, content] = this.thinking.add(text);
    if (!this.tools) return { thinking, content, calls: [] };
    const r = this.tools.add(content);
    return { thinking, content: r.content, calls: r.calls.map((c) => ({ name: c.name, arguments: c.arguments })) };
  }

  /** The output ended: text held back that turned out not to be a call. */
  end(): Parsed {
    return { thinking: "", content: this.tools?.content() ?? "", calls: [] };
  }
}
