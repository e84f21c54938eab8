/**
 * The mixed-load workload (`npm run bench -- --only mixed`, bench/mixed-run.ts): N concurrent
 * clients, each sending its requests back to back, prompt and output lengths drawn from a fixed,
 * seeded distribution (mostly short chats, one request in eight a 2k–3.8k-token prompt), greedy,
 * streamed through `/v1/completions` (the same API, body and raw prompt on lmd and llama-server),
 * every token's arrival timed by the client. What it measures of one pass: generated tokens/s,
 * time to first token, the gaps between a running stream's tokens, and the longest such gap that
 * overlaps a long prompt's prefill (from its request to its first token).
 */

/** One request of the workload: a prompt of about `promptTokens` tokens, exactly `maxTokens` generated. */
export interface MixedRequest {
  prompt: string;
  promptTokens: number;
  maxTokens: number;
  long: boolean;
}

/** What the client saw of one streamed completion (times: performance.now()). */
export interface StreamRecord {
  long: boolean;
  sent: number;
  /** Arrival of each token's event; events read together share a time, as a user sees them. */
  times: number[];
  /** Generated and prompt tokens, from the final `usage` (the events counted when a server gives none). */
  tokens: number;
  promptTokens: number;
}

/** A pass of the workload: every client's records, and when it started and ended. */
export interface Pass {
  records: StreamRecord[];
  start: number;
  end: number;
}

/** The distribution: [share, prompt tokens min–max, generated tokens min–max]. */
const SHORT = { prompt: [16, 256], output: [32, 128] } as const;
const LONG = { prompt: [2048, 3840], output: [16, 64] } as const;
/** One request in eight is long (at least one per pass). */
const LONG_SHARE = 1 / 8;

/** mulberry32: a small seeded PRNG, the same sequence on every machine. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Words of a prompt, different for each `salt` from its first token, so no server reuses another prompt's prefix. */
function text(tokens: number, salt: number, random: () => number): string {
  const words = "the river ran past the old mill where a miller and his daughter kept bread and stories for travellers who came".split(" ");
  const out = [`${salt}`];
  // These words make ~1.15 tokens each in the benchmark model's vocabulary.
  for (let i = 1; i < Math.round(tokens * 0.85); i++) out.push(words[Math.floor(random() * words.length)]!);
  return out.join(" ");
}

/**
 * The requests of each of `clients` clients for one pass, `perClient` each, fixed by `seed`: the
 * same on both servers. Long requests are `max(1, round(total / 8))` positions of a seeded shuffle.
 */
export function workload(clients: number, perClient: number, seed: number): MixedRequest[][] {
  const random = rng(seed);
  const between = ([lo, hi]: readonly [number, number]) => lo + Math.floor(random() * (hi - lo + 1));
  const total = clients * perClient;
  const long = new Set<number>();
  const wanted = Math.max(1, Math.round(total * LONG_SHARE));
  while (long.size < wanted) long.add(Math.floor(random() * total));
  return Array.from({ length: clients }, (_, c) =>
    Array.from({ length: perClient }, (_, k) => {
      const i = c * perClient + k;
      const shape = long.has(i) ? LONG : SHORT;
      const promptTokens = between(shape.prompt);
      return { prompt: text(promptTokens, seed * 1000 + i, random), promptTokens, maxTokens: between(shape.output), long: long.has(i) };
    }),
  );
}

/** The `/v1/completions` body both servers get: raw prompt, greedy, a fixed length, nothing cached from another request. */
function body(r: MixedRequest, model: string): Record<string, unknown> {
  return { model, prompt: r.prompt, max_tokens: r.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true }, cache_prompt: false };
}

/**
 * The request, sent once more when the server closed the connection without answering (undici's
 * "other side closed": llama-server has done so under the 16-client warm-up, which ended the whole
 * run); said on stderr. The time to first token still counts from the first send.
 */
async function post(url: string, json: string): Promise<Response> {
  const send = () => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: json });
  try {
    return await send();
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause : undefined;
    if (!cause || !("code" in cause) || !["UND_ERR_SOCKET", "ECONNRESET"].includes(String(cause.code))) throw err;
    process.stderr.write(`mixed load: ${url} closed the connection without answering (${cause.message}); sending the request again\n`);
    return send();
  }
}

/** One streamed completion, each token event timed on arrival. */
export async function streamCompletion(url: string, model: string, r: MixedRequest): Promise<StreamRecord> {
  const sent = performance.now();
  const res = await post(`${url}/v1/completions`, JSON.stringify(body(r, model)));
  if (!res.ok || !res.body) throw new Error(`${url}/v1/completions answered ${res.status}: ${await res.text()}`);
  const times: number[] = [];
  let usage: { completion_tokens?: number; prompt_tokens?: number } | undefined;
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    const now = performance.now();
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const event = JSON.parse(line.slice(6)) as { choices?: { finish_reason: string | null }[]; usage?: typeof usage };
      if (event.usage) usage = event.usage;
      const choice = event.choices?.[0];
      if (choice && choice.finish_reason == null) times.push(now);
    }
  }
  return { long: r.long, sent, times, tokens: usage?.completion_tokens ?? times.length, promptTokens: usage?.prompt_tokens ?? r.promptTokens };
}

/** Runs one pass: each client sends its requests one after the other, all clients at once. */
export async function runPass(url: string, model: string, requests: MixedRequest[][]): Promise<Pass> {
  const start = performance.now();
  const records = (
    await Promise.all(
      requests.map(async (mine) => {
        const out: StreamRecord[] = [];
        for (const r of mine) out.push(await streamCompletion(url, model, r));
        return out;
      }),
    )
  ).flat();
  return { records, start, end: performance.now() };
}

/** The figures of one pass. */
export interface PassFigures {
  /** Generated tokens over the pass's span. */
  rate: number;
  tokens: number;
  ttft: number[];
  /** Gaps between consecutive tokens of each stream. */
  itl: number[];
  /** The largest gap between two tokens of any stream that overlaps a long prompt's wait for its first token (NaN: none overlapped). */
  stall: number;
  /** The long prompts' times to first token, and their lengths in tokens. */
  longTtft: number[];
  longTokens: number[];
}

export function passFigures(pass: Pass): PassFigures {
  const { records } = pass;
  const tokens = records.reduce((n, r) => n + r.tokens, 0);
  const ttft = records.filter((r) => r.times.length > 0).map((r) => r.times[0]! - r.sent);
  const itl = records.flatMap((r) => r.times.slice(1).map((t, i) => t - r.times[i]!));
  let stall = NaN;
  const longs = records.filter((r) => r.long && r.times.length > 0);
  for (const b of longs) {
    const from = b.sent;
    const to = b.times[0]!;
    for (const a of records) {
      if (a === b) continue;
      for (let i = 1; i < a.times.length; i++) {
        // A gap of a running stream that overlaps the long prompt's wait.
        if (a.times[i]! > from && a.times[i - 1]! < to)
          stall = Number.isNaN(stall) ? a.times[i]! - a.times[i - 1]! : Math.max(stall, a.times[i]! - a.times[i - 1]!);
      }
    }
  }
  return {
    rate: tokens / ((pass.end - pass.start) / 1000),
    tokens,
    ttft,
    itl,
    stall,
    longTtft: longs.map((b) => b.times[0]! - b.sent),
    longTokens: longs.map((b) => b.promptTokens),
  };
}

/** The p-th percentile (0–100) by nearest rank. */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
