/**
 * The message protocol between the daemon and a runner child (DESIGN §1).
 *
 * One runner process holds one loaded model with one llama.cpp context of N sequences. The
 * parent sends a `load` first, then any number of jobs, each identified by a numeric `id`;
 * the child answers each job with `chunk` messages and exactly one `done` or `failed`.
 * This file is shared by both sides and imports nothing.
 */

/** GPU backend choice as CONTRACT §2 spells it. */
export type RunnerGpu = "auto" | "cuda" | "vulkan" | false;

export interface LoadSpec {
  /** Absolute path of the GGUF blob inside the store. */
  path: string;
  /** Context length of the whole context; each sequence may use all of it (llama.cpp's unified KV cache). */
  contextSize: number;
  /** Parallel slots: sequences of the one context. */
  sequences: number;
  threads: number;
  gpu: RunnerGpu;
  /** Layers to offload; undefined = node-llama-cpp's "auto". */
  gpuLayers?: number | undefined;
  /** Batch size for prompt evaluation; undefined = node-llama-cpp's default. */
  batchSize?: number | undefined;
}

export interface SamplingSpec {
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

/** What to evaluate: already-rendered text, or turns the child renders with the model's own chat template. */
export type PromptSpec =
  | { kind: "text"; text: string; /** tokens of an earlier exchange (generate's `context`), evaluated before `text` */ context?: number[] | undefined }
  | { kind: "chat"; turns: ChatTurn[]; context?: number[] | undefined };

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
}

/** What a load will take, by node-llama-cpp's estimates from the GGUF header (nothing allocated yet). */
export interface MemoryEstimate {
  /** RAM for the model's CPU part and the context. */
  ramBytes: number;
  /** VRAM for the offloaded layers and their context (0 on CPU). */
  vramBytes: number;
  /** VRAM free now, as the backend reports it (0 on CPU). */
  vramFreeBytes: number;
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
  threads: number;
  /** Which llama.cpp binary node-llama-cpp loaded: its prebuilt one, or one built here from source. */
  binary: "prebuilt" | "localBuild";
  hasChatTemplate: boolean;
  embeddingLength: number;
  /** The chat template has a thought segment (`think` is supported). */
  thinking?: boolean | undefined;
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
}

export type ToRunner =
  | { type: "load"; spec: LoadSpec }
  /** After an `estimate`: the parent found room, load now. */
  | { type: "admit" }
  | { type: "generate"; id: number; job: GenerateJob }
  | { type: "chat"; id: number; job: ChatJob }
  | { type: "embed"; id: number; job: EmbedJob }
  | { type: "cancel"; id: number }
  | { type: "unload" };

/** corrupt: bad model file; memory: does not fit; invalid: the request cannot be served (a bad JSON Schema); other: anything else. */
export type RunnerFailureKind = "corrupt" | "memory" | "invalid" | "other";

export type FromRunner =
  | { type: "progress"; fraction: number }
  /** Sent before loading anything; the child waits for `admit` (or is stopped). */
  | { type: "estimate"; estimate: MemoryEstimate }
  | { type: "loaded"; info: RunnerInfo }
  | { type: "load-failed"; kind: RunnerFailureKind; message: string }
  | { type: "chunk"; id: number; text: string }
  | { type: "done"; id: number; stats: GenerateStats }
  | { type: "thinking"; id: number; text: string }
  | { type: "chat-done"; id: number; result: ChatResult }
  | { type: "embedded"; id: number; result: EmbedResult }
  | { type: "failed"; id: number; kind: RunnerFailureKind; message: string }
  | { type: "log"; level: "debug" | "info" | "warn" | "error"; msg: string; data?: Record<string, unknown> };
