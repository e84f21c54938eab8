/**
 * The runner's vocabulary as the routes see it: the turns, tools, grammars, stats and logprobs that
 * each API's adapter translates to and from. The routes take these from here, never from `runner/`.
 */
export type { ChatTurn, GenerateStats, GrammarSpec, TokenLogprob, ToolCallSpec, ToolChoice, ToolSpec } from "../runner/types.js";
