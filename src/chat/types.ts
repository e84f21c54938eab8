/**
 * The runner's vocabulary as the routes see it: the turns, tools, grammars, stats and logprobs that
 * each API's adapter translates to and from, and the sink a completion's output goes to. The routes
 * take these from here, never from `runner/`.
 */
export type {
  ChatTurn,
  DoneReason,
  EmbedResult,
  GenerateStats,
  GrammarSpec,
  RankResult,
  SamplingSpec,
  TokenLogprob,
  ToolCallSpec,
  ToolChoice,
  ToolSpec,
} from "../runner/types.js";
export type { CompletionSink, OnText, OutputFlow } from "../runner/handle.js";
