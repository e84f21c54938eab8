/**
 * Truncation made visible and chosen: every generate/chat/v1 answer reports the
 * prompt tokens dropped to fit the context (`truncated_tokens`, `usage.truncated_tokens`), the
 * metric `lmd_truncated_tokens_total` counts them, and `truncate: false` (or SERVICE_TRUNCATE=false)
 * makes an over-long prompt a 400 before anything is generated.
 */
import t from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { assertError } from "../helpers/assert-error.js";

const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon".split(" ");
const text = (n: number, from = 0) => Array.from({ length: n }, (_, i) => words[(i + from) % words.length]).join(" ");
// num_ctx 256 (llama.cpp keeps 256 as is): a history of ~600 words cannot fit, a short one does.
const options = { num_ctx: 256, num_predict: 2, temperature: 0 };
const longHistory = [
  { role: "system", content: "you are terse" },
  ...Array.from({ length: 6 }, (_, i) => [
    { role: "user", content: text(50, i) },
    { role: "assistant", content: text(50, i + 3) },
  ]).flat(),
  { role: "user", content: "last question" },
];
const MODELS = [{ name: "tiny" }, { name: "tpl", install: { template: "{{ range .Messages }}<{{ .Role }}>{{ .Content }}\n{{ end }}<assistant>" } }];

interface Final { truncated_tokens: number; prompt_eval_count: number; done: boolean }

async function truncatedMetric(url: string, model: string): Promise<number> {
  const body = await (await fetch(`${url}/metrics`)).text();
  const line = body.split("\n").find((l) => l.startsWith(`lmd_truncated_tokens_total{model="${model}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

t.test("truncation is reported, counted and refusable", async (t) => {
  // The default context is num_ctx too, so that /v1 (which has no num_ctx) overflows it as well.
  const { url } = await startDaemon(t, { models: MODELS, env: { SERVICE_CONTEXT_LENGTH: "256" } });

  t.test("generate reports truncated_tokens: 0 when it fits, > 0 when cut", async (t) => {
    const short = (await (await postJson(`${url}/api/generate`, { model: "tiny", raw: true, stream: false, prompt: "hello there", options })).json()) as Final;
    t.equal(short.truncated_tokens, 0, "always present, 0 when nothing was dropped");
    const before = await truncatedMetric(url, "tiny");
    const long = (await (await postJson(`${url}/api/generate`, { model: "tiny", raw: true, stream: false, prompt: text(600), options })).json()) as Final;
    t.ok(long.truncated_tokens > 300, `${long.truncated_tokens} tokens dropped`);
    t.ok(long.prompt_eval_count < 256, "what is left fits");
    t.equal(await truncatedMetric(url, "tiny"), before + long.truncated_tokens, "the metric counts them");
    // Streaming: the final object carries it too.
    const res = await postJson(`${url}/api/generate`, { model: "tiny", raw: true, prompt: text(600), options });
    const lines = (await res.text()).trim().split("\n").map((l) => JSON.parse(l) as Final);
    t.equal(lines.at(-1)?.truncated_tokens, long.truncated_tokens, "the streamed final object says the same");
  });

  for (const model of ["tiny", "tpl"]) {
    t.test(`chat (${model === "tiny" ? "GGUF template, LlamaChat" : "Go template"}) reports the turns it drops`, async (t) => {
      const short = (await (await postJson(`${url}/api/chat`, { model, stream: false, messages: [{ role: "user", content: "hi" }], options })).json()) as Final;
      t.equal(short.truncated_tokens, 0, "0 when it fits");
      const before = await truncatedMetric(url, model);
      const res = await postJson(`${url}/api/chat`, { model, stream: false, messages: longHistory, options });
      t.equal(res.status, 200);
      const long = (await res.json()) as Final;
      t.ok(long.truncated_tokens > 200, `${long.truncated_tokens} tokens of old turns dropped (was always 0)`);
      t.ok(long.prompt_eval_count < 256, `the ${long.prompt_eval_count} tokens kept fit`);
      t.equal(await truncatedMetric(url, model), before + long.truncated_tokens, "the metric counts them");
      // The system message and the last turn stay.
      const render = await postJson(`${url}/api/chat`, { model, messages: longHistory, options, _debug_render_only: true });
      const rendered = ((await render.json()) as { _debug_info: { rendered_template: string } })._debug_info.rendered_template;
      t.match(rendered, /you are terse/, "the system message is kept");
      t.match(rendered, /last question/, "the last turn is kept");
      const refused = await postJson(`${url}/api/chat`, { model, stream: false, messages: longHistory, options, truncate: false });
      await assertError(t, refused, 400, "the input length exceeds the context length");
    });
  }

  t.test("generate with truncate:false is a 400, before anything streams", async (t) => {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", raw: true, prompt: text(600), options, truncate: false });
    await assertError(t, res, 400, "the input length exceeds the context length");
    const fits = await postJson(`${url}/api/generate`, { model: "tiny", raw: true, stream: false, prompt: "hello", options, truncate: false });
    t.equal(fits.status, 200, "a prompt that fits runs as usual");
  });

  t.test("/v1/chat/completions reports usage.truncated_tokens", async (t) => {
    const res = await postJson(`${url}/v1/chat/completions`, { model: "tiny", messages: longHistory, max_tokens: 2, temperature: 0 });
    t.equal(res.status, 200);
    const out = (await res.json()) as { usage: { prompt_tokens: number; truncated_tokens: number } };
    t.ok(out.usage.truncated_tokens > 200, `usage.truncated_tokens: ${out.usage.truncated_tokens}`);
    t.ok(out.usage.prompt_tokens < 256, "prompt_tokens counts what was kept");
    const input = longHistory.map((m: { role: string; content: string }) => ({ role: m.role === "system" ? "developer" : m.role, content: m.content }));
    const responses = await postJson(`${url}/v1/responses`, { model: "tiny", input, max_output_tokens: 2, temperature: 0 });
    t.equal(responses.status, 200);
    const r = (await responses.json()) as { truncation: string; usage: { truncated_tokens: number } };
    t.ok(r.usage.truncated_tokens > 200, `/v1/responses usage.truncated_tokens: ${r.usage.truncated_tokens}`);
    t.equal(r.truncation, "auto", "and says it truncates");
    const anthropic = await postJson(`${url}/v1/messages`, {
      model: "tiny",
      max_tokens: 2,
      messages: longHistory.filter((m: { role: string }) => m.role !== "system"),
    });
    t.equal(anthropic.status, 200);
    const a = (await anthropic.json()) as { usage: { truncated_tokens: number } };
    t.ok(a.usage.truncated_tokens > 200, `/v1/messages usage.truncated_tokens: ${a.usage.truncated_tokens}`);
  });
});

t.test("SERVICE_TRUNCATE=false makes refusal the default", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tiny" }], env: { SERVICE_TRUNCATE: "off", SERVICE_CONTEXT_LENGTH: "256" } });
  await assertError(
    t,
    await postJson(`${url}/api/generate`, { model: "tiny", raw: true, prompt: text(600), options }),
    400,
    "the input length exceeds the context length",
  );
  await assertError(
    t,
    await postJson(`${url}/api/chat`, { model: "tiny", messages: longHistory, options }),
    400,
    "the input length exceeds the context length",
  );
  await assertError(
    t,
    await postJson(`${url}/v1/chat/completions`, { model: "tiny", messages: longHistory, max_tokens: 2 }),
    400,
    "the input length exceeds the context length",
  );
  const chosen = await postJson(`${url}/api/chat`, { model: "tiny", stream: false, messages: longHistory, options, truncate: true });
  t.equal(chosen.status, 200, "a request may still ask for truncation");
  t.ok(((await chosen.json()) as Final).truncated_tokens > 0);
});
