/**
 * Request shapes of `POST /api/tokenize` and `POST /api/detokenize` (llama-server's field names:
 * `content`, `tokens`, `add_special`), as types and JSON Schemas.
 */
import { optionsSchema } from "./schemas.js";
import type { ModelOptions } from "./types.js";

export interface TokenizeRequest {
  model: string;
  content: string;
  /** Add the BOS/EOS tokens the vocabulary asks for (llama-server's default: false). */
  add_special?: boolean;
  /** Text spelling a special token becomes that token (llama-server's default: true). */
  parse_special?: boolean;
  keep_alive?: string | number;
  options?: ModelOptions;
}

export interface DetokenizeRequest {
  model: string;
  tokens: number[];
  keep_alive?: string | number;
  options?: ModelOptions;
}

const model = { type: "string", minLength: 1 } as const;
const keepAlive = { type: ["string", "number"] } as const;

export const tokenizeSchema = {
  type: "object",
  required: ["model", "content"],
  properties: {
    model,
    content: { type: "string" },
    add_special: { type: "boolean" },
    parse_special: { type: "boolean" },
    keep_alive: keepAlive,
    options: optionsSchema,
  },
} as const;

export const detokenizeSchema = {
  type: "object",
  required: ["model", "tokens"],
  properties: {
    model,
    tokens: { type: "array", maxItems: 1_000_000, items: { type: "integer", minimum: 0, maximum: 2 ** 31 - 1 } },
    keep_alive: keepAlive,
    options: optionsSchema,
  },
} as const;
