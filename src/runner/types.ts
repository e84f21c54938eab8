/**
 * The runner's vocabulary, shared by the chat engine, the scheduler and both sides of the IPC: what a
 * load asks for (LoadSpec) and reports (RunnerInfo), the jobs a runner runs and what they return.
 * Imports nothing.
 */

/** GPU backend choice as SERVICE_GPU spells it. */
export type RunnerGpu = "auto" | "cuda" | "vulkan" | false;

/** Element type of the KV cache: f16, or quantized to roughly half (q8_0) or a quarter (q4_0) of its size. */
export type KvCacheType = "f16" | "q8_0" | "q4_0";

/** Flash attention: on, off, or "auto" (on where the model and the backend support it). */
export type FlashAttention = "auto" | boolean;

export interface LoadSpec {
  /** Absolute path of the GGUF blob inside the store. */
  path: string;
  /** Context length of the whole context; each sequence may use all of it (llama.cpp's unified KV cache). */
  contextSize: number;
  /** Parallel slots: sequences of the one context. */
  sequences: number;
  /** CPU threads; 0 = chosen by the runner from the cores free at load time (src/cpu.ts). */
  threads: number;
  gpu: RunnerGpu;
  /**
   * The GPUs (indices) the runner may see, from the policy file's `gpus`; undefined = all. Applied
   * by the parent to the child's environment (runnerEnv), before the backend initialises.
   */
  gpus?: number[] | undefined;
  /** VRAM (bytes) node-llama-cpp keeps free on each GPU when it chooses the layers (SERVICE_GPU_OVERHEAD). */
  gpuOverheadBytes?: number | undefined;
  /** Layers to offload; undefined = node-llama-cpp's "auto". */
  gpuLayers?: number | undefined;
  /** Batch size for prompt evaluation (num_batch); undefined = node-llama-cpp's default. */
  batchSize?: number | undefined;
  /** Memory-map the weights (use_mmap); undefined = node-llama-cpp's default (mapped where supported). */
  useMmap?: boolean | undefined;
  /** LoRA adapter GGUFs (absolute paths in the store) applied to every context of the model, scale 1. */
  lora?: string[] | undefined;
  /** Speculative decoding: a draft model's file and/or prompt lookup (runner/speculative.ts). */
  speculation?: SpeculationLoad | undefined;
  /** The KV cache's type (SERVICE_KV_CACHE_TYPE, a policy's kv_cache_type); undefined = f16. A quantized cache needs flash attention. */
  kvCacheType?: KvCacheType | undefined;
  /** SERVICE_FLASH_ATTENTION, a policy's flash_attention; undefined = "auto". */
  flashAttention?: FlashAttention | undefined;
  /** Saved prompt prefixes (runner/prefix-cache.ts); undefined = none. */
  prefixCache?: PrefixCacheSpec | undefined;
  /** SERVICE_STREAM_INTERVAL: how long a job's output after its first is gathered before it is written (child/load.ts); 0 = at once; undefined = 10 ms. */
  streamIntervalMs?: number | undefined;
}

/** Where and how much of a load's evaluated prompts are kept on disk (SERVICE_CACHE_*). */
export interface PrefixCacheSpec {
  dir: string;
  /** Cap on the directory's files, all models together; least recently used go first. */
  maxBytes: number;
  /** Slots holding fewer tokens are not saved. */
  minTokens: number;
}

/** Speculative decoding for a load. */
export interface SpeculationLoad {
  /** The draft model's GGUF (Modelfile DRAFT). */
  draftPath?: string | undefined;
  /** Prompt lookup (no second model). */
  lookup: boolean;
  /** Draft tokens below this probability end a draft (llama-server's --draft-p-min); undefined = node-llama-cpp's 0.6. */
  minConfidence?: number | undefined;
  /** Draft tokens at most per step (Ollama's `draft_num_predict`, llama-server's --spec-draft-n-max); undefined = 12. */
  maxTokens?: number | undefined;
}

export interface SamplingSpec {
  /** false: no speculative decoding for this job even if the model has it (the output is the same either way). */
  speculative?: boolean | undefined;
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed?: number | undefined;
  repeatPenalty: number;
  repeatLastN: number;
  presencePenalty: number;
  frequencyPenalty: number;
  penalizeNewline: boolean;
}

export interface ChatTurn {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** Assistant turns: the tool calls the model made (their results follow as `tool` turns). */
  toolCalls?: ToolCallSpec[] | undefined;
  /** Tool turns: the name of the tool whose result this is (matched to the call; else the next unanswered call). */
  toolName?: string | undefined;
  /** Tool turns: the id of the call this answers, as the client sent it (Go templates show it as `.ToolCallID`). */
  toolCallId?: string | undefined;
  /** Assistant turns: the thoughts that came with the answer (Go templates show them as `.Thinking`). */
  thinking?: string | undefined;
}

/** A function the model may call: its name, description and a JSON Schema of its arguments. */
export interface ToolSpec {
  name: string;
  description?: string | undefined;
  parameters?: object | undefined;
}

/** A call of a tool: the function's name and its arguments object. */
export interface ToolCallSpec {
  name: string;
  arguments: Record<string, unknown>;
  /** A past call's id as the client sent it back (Go templates show it as `.ID`). */
  id?: string | undefined;
}

/**
 * `auto`: the model may call a tool; `none`: tools are not offered; `required`: it must call one
 * (enforced by grammar); `{name}`: it must call that one.
 */
export type ToolChoice = "auto" | "none" | "required" | { name: string };

/** A chat turn sequence rendered with the model's own chat template (node-llama-cpp's LlamaChat). */
export interface ChatJob {
  turns: ChatTurn[];
  sampling: SamplingSpec;
  maxTokens?: number | undefined;
  fillContext?: boolean | undefined;
  stop: string[];
  /** `format`; not combined with tools (the answer is constrained to the format instead). */
  grammar?: GrammarSpec | undefined;
  tools?: ToolSpec[] | undefined;
  toolChoice?: ToolChoice | undefined;
  /** true: thoughts allowed and reported apart; false: no thought tokens; undefined: the template's default. */
  think?: boolean | undefined;
  /** Report each content token's log probability with this many alternatives (0–20); undefined = off. */
  logprobs?: number | undefined;
  /** Render and tokenize the prompt only: `chat-done` with `promptTokens`, nothing evaluated (count_tokens). */
  countOnly?: boolean | undefined;
  /** A prompt over the context: true/undefined drops the oldest turns (system and tools kept), false fails (`invalid`). */
  truncate?: boolean | undefined;
}

export interface ChatResult {
  stats: GenerateStats;
  toolCalls: ToolCallSpec[];
}

/** Texts to embed; `truncate: false` makes an input longer than the context fail (`invalid`). */
export interface EmbedJob {
  inputs: string[];
  truncate: boolean;
}

export interface EmbedResult {
  /** One raw (not normalized) vector per input. */
  embeddings: number[][];
  /** Tokens evaluated over all inputs. */
  promptTokens: number;
}

/** Reranking (runner/child/rank.ts): a relevance score of each document for the query. */
export interface RankJob {
  query: string;
  documents: string[];
}

export interface RankResult {
  /** One score per document, in input order: node-llama-cpp's probability in [0, 1]. */
  scores: number[];
  /** Tokens evaluated over all (query, document) pairs. */
  promptTokens: number;
}

/** What to evaluate: already-rendered text, or turns the child renders with the model's own chat template. */
export type PromptSpec =
  | { kind: "text"; text: string; /** tokens of an earlier exchange (generate's `context`), evaluated before `text` */ context?: number[] | undefined }
  | { kind: "chat"; turns: ChatTurn[]; context?: number[] | undefined; /** as a chat job's */ think?: boolean | undefined };

export type GrammarSpec = { kind: "json" } | { kind: "schema"; schema: object };

export interface GenerateJob {
  prompt: PromptSpec;
  sampling: SamplingSpec;
  /** Tokens to generate at most; undefined = until end of generation (context shifts as needed). */
  maxTokens?: number | undefined;
  /** num_predict -2: stop when the context is full instead of shifting it. */
  fillContext?: boolean | undefined;
  stop: string[];
  grammar?: GrammarSpec | undefined;
  /** Report each token's log probability with this many alternatives (0–20); undefined = off. */
  logprobs?: number | undefined;
  /** A prompt over the context: true/undefined drops its front, false fails (`invalid`). */
  truncate?: boolean | undefined;
  /** Tokens the parent already dropped from this prompt (Go-template chat history): added to `truncatedTokens`. */
  droppedTokens?: number | undefined;
  /** Write special tokens (not those that end the generation) as their text: harmony's tags, which its parser reads. */
  specialTokens?: boolean | undefined;
}

/** A token and its natural-log probability; `bytes` are its text's UTF-8 bytes. */
export interface TokenProbability {
  token: string;
  logprob: number;
  bytes: number[];
}

/**
 * A generated token's log probability in the distribution it was sampled from (after repeat
 * penalties, grammar, top_k/top_p/min_p and temperature; at temperature 0 the model's whole
 * distribution), with the most likely alternatives at its position when asked for.
 */
export interface TokenLogprob extends TokenProbability {
  top?: TokenProbability[] | undefined;
}

/** What a load will take, by node-llama-cpp's estimates from the GGUF header (nothing allocated yet). */
export interface MemoryEstimate {
  /** RAM for the model's CPU part and the context. */
  ramBytes: number;
  /** VRAM for the offloaded layers and their context (0 on CPU). */
  vramBytes: number;
  /** VRAM free now, as the backend reports it (0 on CPU). */
  vramFreeBytes: number;
  /** GPUs the runner sees (its VRAM figures add theirs up); 0 on CPU. */
  gpuDevices?: number | undefined;
  /** Layers the load will offload (num_gpu, or node-llama-cpp's "auto" resolved). */
  gpuLayers: number;
}

/** What a loaded runner reports about itself. */
export interface RunnerInfo {
  contextSize: number;
  trainContextSize: number;
  sequences: number;
  /** Bytes of RAM the model and its context take, by node-llama-cpp's accounting. */
  ramBytes: number;
  /** Bytes of VRAM (0 on CPU). */
  vramBytes: number;
  gpu: string | false;
  gpuLayers: number;
  /** The model's offloadable layers (its blocks and the output layer): gpuLayers equal to it is every layer on the GPU. */
  totalLayers?: number | undefined;
  /** CPU threads the load started with (SERVICE_THREADS, num_thread, or the free-core rule's choice). */
  threads: number;
  /** The context's prompt batch size (num_batch). */
  batchSize: number;
  /** Which llama.cpp binary node-llama-cpp loaded: its prebuilt one, or one built here from source. */
  binary: "prebuilt" | "localBuild";
  /** "persistent": the threadpool library is loaded (contexts of 2+ threads reuse one pool's threads); "per-decode": node-llama-cpp alone. */
  threadpool: "persistent" | "per-decode";
  hasChatTemplate: boolean;
  embeddingLength: number;
  /** The chat template has a thought segment (`think` is supported). */
  thinking?: boolean | undefined;
  /** The thought's tags, and whether a fresh answer with thinking on starts inside it (/api/generate splits its output by them). */
  thoughts?: { open: string; close: string; opened: boolean } | undefined;
}

export type DoneReason = "stop" | "length" | "cancelled";

export interface GenerateStats {
  /** Tokens of the whole prompt as evaluated by the model (including BOS). */
  promptTokens: number;
  /** Prompt tokens actually evaluated (not taken from the slot's cache). */
  promptEvalCount: number;
  promptEvalNs: number;
  evalCount: number;
  evalNs: number;
  doneReason: DoneReason;
  /** Prompt and response tokens without BOS: generate's `context`. */
  context: number[];
  /** Prompt was longer than the context and lost this many tokens from its front. */
  truncatedTokens: number;
  /** The request's stop sequence that ended the generation (`doneReason: "stop"`), if one did. */
  stopSequence?: string | undefined;
  /** Speculative decoding: draft tokens checked by the target and accepted (when it ran). */
  draft?: { proposed: number; accepted: number } | undefined;
}

/** Stats of a job that evaluated and generated nothing (cancelled before it ran, or `num_predict: 0`). */
export function emptyStats(doneReason: DoneReason, context: number[] = []): GenerateStats {
  return { promptTokens: 0, promptEvalCount: 0, promptEvalNs: 0, evalCount: 0, evalNs: 0, doneReason, context, truncatedTokens: 0 };
}

/** Render-only (`_debug_render_only`): the prompt a chat job would evaluate, as text, nothing generated. */
export interface RenderJob {
  turns: ChatTurn[];
  tools?: ToolSpec[] | undefined;
  /** As a chat job's: the answer opens as the template opens it for this value. */
  think?: boolean | undefined;
}
