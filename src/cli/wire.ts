/**
 * The wire shapes the CLI reads, as names for its own code: aliases of the API's types in
 * src/api/ (the CLI talks only through src/api/client.ts and imports nothing from the server).
 */
import type { ChatChunk as ApiChatChunk, ChatFinal } from "../api/chat-types.js";

export type { ChatMessage, ChatRequest } from "../api/chat-types.js";
export type { ModelDetails, PsResponse, ShowResponse, TagsResponse } from "../api/model-types.js";
export type { ProgressResponse as ProgressLine } from "../api/model-types.js";

/** A line of a chat stream: a chunk, or the final object with its stats. */
export type ChatChunk = ApiChatChunk | ChatFinal;
