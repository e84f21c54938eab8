/**
 * JSON Schemas of request bodies, with the ranges docs/errors.md lists. Compiled with ajv by
 * `http/validate.ts`, which turns the first violation into the 400 message (`invalid type for parameter
 * 'options.top_k': expected integer`, `temperature must be between 0 and 2`, `prompt is required`).
 * Unknown top-level fields and unknown option keys are allowed (and ignored).
 */

const num = (minimum?: number, maximum?: number) => ({
  type: "number",
  ...(minimum === undefined ? {} : { minimum }),
  ...(maximum === undefined ? {} : { maximum }),
});
// ajv's "integer" accepts Infinity (`1e400` in JSON): without an explicit maximum, a nested one refuses
// it and unsafe integers ("<name> must be at most 9007199254740991") while an ordinary out-of-range
// value still gets its own "must be at least" message. Memory bounds (num_ctx) are the scheduler's.
const int = (minimum?: number, maximum?: number) => ({
  ...num(minimum, maximum),
  type: "integer",
  ...(maximum === undefined ? { allOf: [{ maximum: Number.MAX_SAFE_INTEGER }, { minimum: -Number.MAX_SAFE_INTEGER }] } : {}),
});

export const optionsSchema = {
  type: "object",
  properties: {
    num_keep: int(-1),
    seed: int(),
    num_predict: int(-2),
    top_k: int(0),
    top_p: num(0, 1),
    min_p: num(0, 1),
    typical_p: num(0, 1),
    repeat_last_n: int(-1),
    temperature: num(0, 2),
    repeat_penalty: num(0, 2),
    presence_penalty: num(-2, 2),
    frequency_penalty: num(-2, 2),
    penalize_newline: { type: "boolean" },
    stop: { type: ["string", "array"], items: { type: "string" }, maxItems: 16 },
    num_ctx: int(1),
    num_batch: int(1),
    num_gpu: int(-1),
    main_gpu: int(0),
    use_mmap: { type: "boolean" },
    num_thread: int(0),
    // lmd: speculative decoding (docs/models.md): prompt lookup for this load, off for one request.
    prompt_lookup: { type: "boolean" },
    speculative: { type: "boolean" },
    draft_p_min: num(0, 1),
    // Ollama's: draft tokens at most per step (0: the default, lmd's schedule of up to 12).
    draft_num_predict: int(0, 64),
  },
} as const;

const keepAlive = { type: ["string", "number"] } as const;
const format = { type: ["string", "object"] } as const;

export const generateSchema = {
  type: "object",
  required: ["model", "prompt"],
  properties: {
    model: { type: "string", minLength: 1 },
    prompt: { type: "string" },
    suffix: { type: "string" },
    system: { type: "string" },
    template: { type: "string" },
    context: { type: "array", items: int(0, 2 ** 31 - 1) },
    stream: { type: "boolean" },
    raw: { type: "boolean" },
    logprobs: { type: "boolean" },
    top_logprobs: int(0, 20),
    format,
    keep_alive: keepAlive,
    options: optionsSchema,
    images: { type: ["array", "null"], items: { type: "string" } },
    think: { type: ["boolean", "string"], enum: [true, false, "high", "medium", "low", "max"] },
    _debug_render_only: { type: "boolean" },
    truncate: { type: "boolean" },
  },
} as const;
