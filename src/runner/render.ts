/**
 * Render-only and tokenize jobs in the runner child (imported only by child.ts): what the model's own
 * chat template (node-llama-cpp's chat wrapper, Jinja included) makes of a conversation, as text, for
 * `_debug_render_only`; and the tokens of already-rendered text, for the parent's history truncation.
 */
import { type Token, type ChatModelFunctions, type GbnfJsonSchema, type LlamaModel } from "node-llama-cpp";
import { chatWrapperOf, toHistory } from "./chat.js";
import { answerPrompt, promptText } from "./thinking-form.js";
import type { RenderJob } from "./protocol.js";
import type { JobRuntime } from "./runtime.js";
import { tokenizeAsync } from "./tokens.js";
import { tokenMessages } from "./token-parts.js";

/** Answers one `render` job with `rendered` (or `failed` when the template rejects the turns). */
export function runRender(rt: JobRuntime, id: number, job: RenderJob): void {
  const l = rt.loaded();
  if (!l) return rt.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  try {
    const functions: ChatModelFunctions | undefined = job.tools?.length
      ? Object.fromEntries(job.tools.map((t) => [t.name, { ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { params: t.parameters as GbnfJsonSchema } : {}) }]))
      : undefined;
    rt.send({ type: "render-start", id });
    const { text } = answerPrompt(l.model, chatWrapperOf(l.model), toHistory(job.turns), job.think, functions);
    rt.send({ type: "rendered", id, text: promptText(text, l.model) });
  } catch (err) {
    rt.send({ type: "failed", id, kind: "invalid", message: `the model's chat template cannot render these messages: ${rt.clientSafe(err)}` });
  }
}

/**
 * Answers one `tokenize` job: special tokens parsed, no BOS added (the runner adds it when it
 * evaluates). The text is tokenized in chunks (runner/tokens.ts) and a `cancel` stops it between
 * two; the tokens go back in parts of packed 32-bit integers (runner/token-parts.ts).
 */
export async function runTokenize(rt: JobRuntime, id: number, text: string, addSpecial = false, parseSpecial = true): Promise<void> {
  const l = rt.loaded();
  if (!l) return rt.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  const abort = new AbortController();
  rt.jobs.set(id, abort);
  try {
    const tokens = await tokenizeAsync(l.model, text, parseSpecial, undefined, abort.signal);
    // llama-server's add_special: BOS/EOS exactly where the vocabulary's add_bos/add_eos flags ask.
    const { bos, eos, shouldPrependBosToken, shouldAppendEosToken } = l.model.tokens;
    if (addSpecial && shouldPrependBosToken && bos !== null) tokens.unshift(bos);
    if (addSpecial && shouldAppendEosToken && eos !== null) tokens.push(eos);
    for (const msg of tokenMessages(id, tokens)) rt.send(msg);
  } catch (err) {
    if (abort.signal.aborted) return rt.send({ type: "failed", id, kind: "other", message: "cancelled" });
    rt.send({ type: "failed", id, kind: "other", message: rt.clientSafe(err, l.modelFile) });
  } finally {
    rt.jobs.delete(id);
  }
}

/** Answers one `detokenize` job with `rendered`: special tokens written out, as llama-server's /detokenize. */
export function runDetokenize(rt: JobRuntime, id: number, tokens: number[]): void {
  const l = rt.loaded();
  if (!l) return rt.send({ type: "failed", id, kind: "other", message: "model is not loaded" });
  // llama.cpp reads token attributes with .at(): an id outside the vocabulary would abort the runner.
  const size = vocabularySize(l.model);
  const bad = tokens.find((t) => t >= size);
  if (bad !== undefined) return rt.send({ type: "failed", id, kind: "invalid", message: `token ${bad} is not in the model's vocabulary (size ${size})` });
  rt.send({ type: "rendered", id, text: l.model.detokenize(tokens as Token[], true) });
}

/** Number of tokens in the model's vocabulary (ids are below it). */
export function vocabularySize(model: LlamaModel): number {
  const tokens = (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
  return Array.isArray(tokens) ? tokens.length : 0;
}
