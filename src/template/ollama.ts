/**
 * Ollama's `template.(*Template).Execute(w, Values)` (template/template.go): the data it hands a
 * template, in the three ways it does — prompt + suffix; `.Messages` when the template uses it;
 * otherwise the legacy System/Prompt/Response template rendered turn by turn and cut after the
 * last `.Response`.
 */
import type { ListNode } from "./ast.js";
import { Budget, type ExecLimits } from "./budget.js";
import { templateMessages, templateTools, type MessageIn } from "./ollama-types.js";
import type { Template } from "./template.js";
import { copyNode, deleteNode } from "./walk.js";

export interface OllamaToolCall {
  id?: string;
  function: { index?: number; name: string; arguments: Record<string, unknown> };
}

export interface OllamaMessage {
  role: string;
  content: string;
  thinking?: string;
  images?: unknown[];
  tool_calls?: OllamaToolCall[];
  tool_name?: string;
  tool_call_id?: string;
}

export interface OllamaValues {
  messages: OllamaMessage[];
  tools?: unknown[];
  prompt?: string;
  suffix?: string;
  think?: boolean;
  thinkLevel?: string;
  isThinkSet?: boolean;
  forceLegacy?: boolean;
}

/**
 * Renders `t` for `v` exactly as Ollama's Template.Execute does. All executions of one render
 * (a legacy template runs once per turn) share one budget of steps, output, values and time.
 */
export function renderOllama(t: Template, v: OllamaValues, limits: ExecLimits = {}): string {
  const b = new Budget(limits);
  const think = { Think: v.think ?? false, ThinkLevel: v.thinkLevel ?? "", IsThinkSet: v.isThinkSet ?? false };
  const { system, messages } = collate(v.messages);
  if (v.prompt && v.suffix) return t.execute({ Prompt: v.prompt, Suffix: v.suffix, Response: "", ...think }, b);
  if (!v.forceLegacy && t.vars().has("messages")) {
    return t.execute({ System: system, Messages: templateMessages(messages), Tools: templateTools(v.tools), Response: "", ...think }, b);
  }
  // Legacy: one execution per System/Prompt/Response turn.
  let out = "";
  let sys = "";
  let prompt = "";
  let response = "";
  const flush = (): void => {
    out += t.execute({ System: sys, Prompt: prompt, Response: response, ...think }, b);
    sys = prompt = response = "";
  };
  for (const m of messages ?? []) {
    if (m.role === "system") {
      if (prompt || response) flush();
      sys = m.content;
    } else if (m.role === "user") {
      if (response) flush();
      prompt = m.content;
    } else if (m.role === "assistant") response = m.content;
  }
  // The last turn stops at `.Response`, so generation continues from there.
  return out + t.executeNode(cutAfterResponse(t.root), { System: sys, Prompt: prompt, Response: response, ...think }, b);
}

/** Ollama's deleteNode(root.Copy(), ...): keeps everything up to the first `.Response` field and drops the rest. */
function cutAfterResponse(root: ListNode): ListNode {
  let tree = cutTrees.get(root);
  if (!tree) cutTrees.set(root, (tree = cutCopy(root)));
  return tree;
}
const cutTrees = new WeakMap<ListNode, ListNode>();

function cutCopy(root: ListNode): ListNode {
  let cut = false;
  return deleteNode(copyNode(root), (n) => {
    if (n.type === "field" && n.ident.includes("Response")) {
      cut = true;
      return false;
    }
    return cut;
  });
}

/**
 * Ollama's collate(): consecutive messages of one role merge ("\n\n"), except tool messages;
 * all system contents are also joined as `.System`. Returns null messages for none (Go's nil slice).
 */
export function collate(msgs: OllamaMessage[]): { system: string; messages: MessageIn[] | null } {
  const system: string[] = [];
  const out: MessageIn[] = [];
  for (const raw of msgs) {
    // Ollama lower-cases roles when it decodes a message (api.Message.UnmarshalJSON).
    const m = { ...raw, role: String(raw.role ?? "").toLowerCase(), content: raw.content ?? "" };
    if (m.role === "system") system.push(m.content);
    const last = out[out.length - 1];
    if (last && last.role === m.role && m.role !== "tool") last.content += `\n\n${m.content}`;
    else out.push(m);
  }
  return { system: system.join("\n\n"), messages: out.length ? out : null };
}
