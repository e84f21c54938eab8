/**
 * Logprobs on the real runner: Ollama's fields on /api/generate and /api/chat, OpenAI's on
 * /v1/completions and /v1/chat/completions. Each token's probability comes from the distribution
 * it was sampled from, so: the alternatives' probabilities sum to at most 1, a greedy token is the
 * top alternative, and the same prompt gives the same numbers on every surface.
 */
import t, { type Test } from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";

interface Alt {
  token: string;
  logprob: number;
  bytes: number[];
}
interface Lp extends Alt {
  top_logprobs?: Alt[];
}

const greedy = { temperature: 0, seed: 7 };
const prompt = "Once upon a time";
/** A raw, unstreamed /api/generate request with log probabilities. */
const rawGenerate = { model: "chat", prompt, raw: true, stream: false, logprobs: true };
const messages = [{ role: "user", content: "Tell me a story" }];

/** The checks every logprob list must pass. */
function checkList(t: Test, lps: Lp[], top: number, greedyTokens: boolean): void {
  t.ok(lps.length > 0, "logprobs reported");
  for (const lp of lps) {
    t.same(lp.bytes, [...Buffer.from(lp.token, "utf8")], "bytes are the token's UTF-8");
    t.ok(lp.logprob <= 0, "a log probability");
    const alts = lp.top_logprobs ?? [];
    t.equal(alts.length, top, `${top} alternatives`);
    const sum = alts.reduce((s, a) => s + Math.exp(a.logprob), 0);
    t.ok(sum <= 1 + 1e-6, `the alternatives' probabilities sum to at most 1 (${sum})`);
    for (let i = 1; i < alts.length; i++) t.ok(alts[i]!.logprob <= alts[i - 1]!.logprob, "alternatives are sorted");
    if (greedyTokens && top > 0) t.same([alts[0]!.token, alts[0]!.logprob], [lp.token, lp.logprob], "the greedy token is the most likely one");
  }
}

const strip = (lps: Lp[]) => lps.map(({ token, logprob, top_logprobs }) => ({ token, logprob, top: top_logprobs?.map((a) => [a.token, a.logprob]) }));

t.test("logprobs", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml" } }] });

  t.test("generate (raw) and /v1/completions: same prompt, same numbers", async (t) => {
    const res = await postJson(`${url}/api/generate`, {
      ...rawGenerate,
      top_logprobs: 3,
      options: { ...greedy, num_predict: 6 },
    });
    const gen = (await res.json()) as { response: string; eval_count: number; logprobs: Lp[] };
    t.equal(gen.logprobs.length, gen.eval_count, "one per generated token");
    t.equal(gen.logprobs.map((l) => l.token).join(""), gen.response, "the tokens spell the response");
    checkList(t, gen.logprobs, 3, true);

    const streamed = await readNdjson(
      await postJson(`${url}/api/generate`, { model: "chat", prompt, raw: true, logprobs: true, top_logprobs: 3, options: { ...greedy, num_predict: 6 } }),
    );
    const chunks = streamed.filter((c) => c.done === false);
    t.same(chunks.flatMap((c) => strip(c.logprobs as Lp[])), strip(gen.logprobs), "streamed chunks carry the same logprobs");
    t.ok(chunks.every((c) => (c.logprobs as Lp[]).map((l) => l.token).join("") === c.response), "each chunk's logprobs are its own tokens");

    const v1 = await postJson(`${url}/v1/completions`, { model: "chat", prompt, logprobs: 3, max_tokens: 6, temperature: 0, seed: 7 });
    const body = (await v1.json()) as {
      choices: {
        text: string;
        logprobs: { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[]; content: Lp[] };
      }[];
    };
    const choice = body.choices[0]!;
    t.equal(choice.text, gen.response);
    t.same(strip(choice.logprobs.content), strip(gen.logprobs), "the same numbers as /api/generate");
    t.same(choice.logprobs.tokens, gen.logprobs.map((l) => l.token), "legacy tokens");
    t.same(choice.logprobs.token_logprobs, gen.logprobs.map((l) => l.logprob), "legacy token_logprobs");
    t.same(choice.logprobs.top_logprobs[0], Object.fromEntries(gen.logprobs[0]!.top_logprobs!.map((a) => [a.token, a.logprob])), "legacy top_logprobs maps");
    t.equal(choice.logprobs.text_offset[0], 0);
  });

  t.test("chat and /v1/chat/completions: same messages, same numbers", async (t) => {
    const res = await postJson(`${url}/api/chat`, {
      model: "chat",
      messages,
      stream: false,
      logprobs: true,
      top_logprobs: 2,
      options: { ...greedy, num_predict: 6 },
    });
    const chat = (await res.json()) as { message: { content: string }; logprobs: Lp[] };
    t.equal(chat.logprobs.map((l) => l.token).join(""), chat.message.content, "the tokens spell the content");
    checkList(t, chat.logprobs, 2, true);

    const request = { model: "chat", messages, logprobs: true, top_logprobs: 2, max_tokens: 6, temperature: 0, seed: 7 };
    const v1 = await postJson(`${url}/v1/chat/completions`, request);
    const body = (await v1.json()) as { choices: { logprobs: { content: Lp[] } }[] };
    t.same(strip(body.choices[0]!.logprobs.content), strip(chat.logprobs), "the same numbers as /api/chat");

    const sse = await (
      await postJson(`${url}/v1/chat/completions`, { ...request, stream: true })
    ).text();
    const events = sse
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)) as { choices: { logprobs: { content: Lp[] } | null }[] });
    t.same(strip(events.flatMap((e) => e.choices[0]?.logprobs?.content ?? [])), strip(chat.logprobs), "streamed chunks carry them too");

    const resp = await postJson(`${url}/v1/responses`, {
      model: "chat",
      input: messages[0]!.content,
      include: ["message.output_text.logprobs"],
      top_logprobs: 2,
      max_output_tokens: 6,
      temperature: 0,
    });
    const output = (await resp.json()) as { output: { content: { logprobs: Lp[] }[] }[] };
    t.same(strip(output.output[0]!.content[0]!.logprobs), strip(chat.logprobs), "/v1/responses: the same numbers in output_text.logprobs");
  });

  t.test("sampling at a temperature with a seed: the same numbers on both raw surfaces", async (t) => {
    const gen = (await (
      await postJson(`${url}/api/generate`, {
        model: "chat",
        prompt,
        raw: true,
        stream: false,
        logprobs: true,
        top_logprobs: 4,
        options: { temperature: 1, seed: 42, num_predict: 8 },
      })
    ).json()) as { response: string; logprobs: Lp[] };
    const v1 = (await (await postJson(`${url}/v1/completions`, { model: "chat", prompt, logprobs: 4, max_tokens: 8, temperature: 1, seed: 42 })).json()) as {
      choices: { text: string; logprobs: { content: Lp[] } }[];
    };
    t.equal(v1.choices[0]!.text, gen.response, "the same sampled text");
    t.same(strip(v1.choices[0]!.logprobs.content), strip(gen.logprobs), "the same numbers");
    checkList(t, gen.logprobs, 4, false);
  });

  t.test("without alternatives, sampling at a temperature", async (t) => {
    const res = await postJson(`${url}/api/generate`, { ...rawGenerate, options: { temperature: 1.5, seed: 3, num_predict: 8 } });
    const gen = (await res.json()) as { logprobs: Lp[]; eval_count: number };
    t.equal(gen.logprobs.length, gen.eval_count);
    checkList(t, gen.logprobs, 0, false);
    t.notOk(gen.logprobs.some((l) => "top_logprobs" in l), "no top_logprobs field when none were asked for (as Ollama)");
  });

  t.test("off unless asked; range checked", async (t) => {
    const plain = (await (
      await postJson(`${url}/api/generate`, { model: "chat", prompt, raw: true, stream: false, options: { ...greedy, num_predict: 2 } })
    ).json()) as Record<string, unknown>;
    t.notOk("logprobs" in plain, "no logprobs field");
    const v1 = (await (await postJson(`${url}/v1/chat/completions`, { model: "chat", messages, max_tokens: 2 })).json()) as {
      choices: { logprobs: unknown }[];
    };
    t.equal(v1.choices[0]?.logprobs, null, "null on /v1");
    await assertError(
      t,
      await postJson(`${url}/api/generate`, { model: "chat", prompt, logprobs: true, top_logprobs: 21 }),
      400,
      "top_logprobs must be between 0 and 20",
    );
    await assertError(
      t,
      await postJson(`${url}/api/chat`, { model: "chat", messages, logprobs: true, top_logprobs: -1 }),
      400,
      "top_logprobs must be between 0 and 20",
    );
  });
});
