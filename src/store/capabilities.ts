/**
 * What a stored model can do, in Ollama's words and by Ollama's rules (server/images.go
 * `Capabilities()`): `embedding` for a model with a pooling type, else `completion`; from the
 * template in effect — the Go template (template layer) when the model has one, else the GGUF's
 * Jinja chat template — `tools`, `insert` (Go: uses `.Suffix`) and `thinking` (Go: shows
 * `.Thinking` between tags inside `range .Messages`; Jinja: has `<think>` and `</think>`, or splits
 * content at `</think>`); `thinking` for the gpt-oss family (config `model_family` `gptoss` or
 * `gpt-oss`, whatever the template) and `tools` and `thinking` for a config that names the
 * `harmony` parser (template/harmony.ts). Never `vision`, which Ollama gives a model with a projector
 * layer: node-llama-cpp runs no projector, so lmd refuses images on every model, and clients that
 * offer image input by this list (Open WebUI, LangChain) must not be told otherwise. A model whose config
 * names a renderer is judged by its GGUF's template, the one lmd renders it with
 * (store.goTemplateOf). lmd's own word `reranking` replaces `embedding` for a reranker (its pooled
 * output is a score).
 */
import type { Capability } from "../api/model-types.js";
import type { GgufMetadata } from "../gguf/gguf.js";
import { isReranker } from "../gguf/rerank.js";
import { parseTemplate } from "../template/index.js";
import { inferThinkingTags } from "../template/thinking.js";
import { goTemplateOf, type ModelConfig } from "./store.js";

/** The capabilities of a model from its GGUF header, its Go template (if any) and its config. */
export function capabilities(gguf: GgufMetadata | undefined, layerTemplate: string | undefined, config: ModelConfig): Capability[] {
  const template = goTemplateOf({ template: layerTemplate, renderer: config.renderer });
  const arch = gguf?.metadata["general.architecture"];
  const embedding = typeof arch === "string" && gguf?.metadata[`${arch}.pooling_type`] !== undefined;
  const out: Capability[] = [gguf && isReranker(gguf) ? "reranking" : embedding ? "embedding" : "completion"];
  if (!embedding) {
    const chatTemplate = gguf?.metadata["tokenizer.chat_template"];
    // The template that renders the model's prompts decides, as lmd renders them (docs/templates.md).
    if (template !== undefined) out.push(...goTemplateCapabilities(template));
    else if (typeof chatTemplate === "string") out.push(...chatTemplateCapabilities(chatTemplate));
    if (config.parser === "harmony") out.push("tools", "thinking");
    if (config.family === "gptoss" || config.family === "gpt-oss") out.push("thinking");
  }
  return [...new Set(out)];
}

/** Ollama's goTemplateCapabilities: the template's variables and its thinking tags. */
export function goTemplateCapabilities(source: string): Capability[] {
  let t;
  try {
    t = parseTemplate(source);
  } catch {
    return []; // Ollama: "model template contains errors", no capabilities of its own
  }
  const vars = t.vars();
  const out: Capability[] = [];
  if (vars.has("tools")) out.push("tools");
  if (vars.has("suffix")) out.push("insert");
  const [open, close] = inferThinkingTags(t.root);
  if (open !== "" && close !== "") out.push("thinking");
  return out;
}

/** Ollama's chatTemplateCapabilities (chatTemplateHasToolSupport, chatTemplateHasThinkingSupport). */
export function chatTemplateCapabilities(template: string): Capability[] {
  const out: Capability[] = [];
  if (template.includes("tools") || template.includes("tool_call")) out.push("tools");
  const tags = template.includes("<think>") && template.includes("</think>");
  const splits =
    (template.includes("content.split('</think>')") || template.includes('content.split("</think>")')) &&
    !template.includes("reasoning_content") &&
    !template.includes("<SPECIAL_12>");
  if (tags || splits) out.push("thinking");
  return out;
}
