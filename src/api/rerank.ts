/**
 * Wire types and the JSON Schema of `POST /v1/rerank` (alias `/api/rerank`): llama-server's and
 * Jina's / Cohere's shape. A leaf like the rest of api/.
 */

/** A document: its text, or Jina's / Cohere's `{text}` object. */
export type RerankDocument = string | { text: string };

export interface RerankRequest {
  model: string;
  query: string;
  documents: RerankDocument[];
  /** Keep the best `top_n` results (default: all). */
  top_n?: number;
  /** Echo each result's document as `{text}` (Jina, Cohere). */
  return_documents?: boolean;
  keep_alive?: string | number;
}

export interface RerankResult {
  index: number;
  relevance_score: number;
  document?: { text: string };
}

export interface RerankResponse {
  model: string;
  object: "list";
  usage: { prompt_tokens: number; total_tokens: number };
  /** Sorted by `relevance_score`, highest first. */
  results: RerankResult[];
}

export const rerankSchema = {
  type: "object",
  required: ["model", "query", "documents"],
  properties: {
    model: { type: "string", minLength: 1 },
    query: { type: "string" },
    documents: {
      type: "array",
      minItems: 1,
      items: { anyOf: [{ type: "string" }, { type: "object", required: ["text"], properties: { text: { type: "string" } } }] },
    },
    top_n: { type: "integer", minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    return_documents: { type: "boolean" },
    keep_alive: { type: ["string", "number"] },
  },
} as const;
