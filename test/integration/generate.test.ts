/**
 * The seed's rules and /api/generate on the real daemon with a real runner and a generated model.
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { installGguf } from "../../src/store/install.js";
import { testGguf } from "../helpers/models.js";
import { ollamaDecoder } from "../helpers/pieces.js";

const greedy = { temperature: 0, seed: 7, num_predict: 12 };

t.test("the seed's rules", async (t) => {
  const { url } = await startDaemon(t);

  t.test("missing prompt → 400 prompt is required", async (t) => {
    await assertError(t, await postJson(`${url}/api/generate`, { model: "tiny" }), 400, "prompt is required");
  });
  t.test("missing model → 400 model is required", async (t) => {
    await assertError(t, await postJson(`${url}/api/generate`, { prompt: "hi" }), 400, "model is required");
    await assertError(t, await postJson(`${url}/api/generate`, { model: "", prompt: "hi" }), 400, "model is required");
  });
  t.test("unknown model → 404 with the contract's message", async (t) => {
    await assertError(t, await postJson(`${url}/api/generate`, { model: "nope", prompt: "hi" }), 404, "model 'nope' not found, try pulling it first");
  });
  t.test("stream:false → one JSON object with response", async (t) => {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "Hello there", stream: false, options: greedy });
    t.equal(res.status, 200);
    t.match(res.headers.get("content-type"), /^application\/json/);
    const body = (await res.json()) as Record<string, unknown>;
    t.type(body.response, "string");
    t.ok((body.response as string).length > 0, "some text was generated");
    t.equal(body.done, true);
    t.equal(body.model, "tiny");
    for (const k of ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"]) {
      t.ok(Number.isInteger(body[k]) && (body[k] as number) >= 0, `${k} is a non-negative integer`);
    }
    t.ok((body.total_duration as number) >= (body.eval_duration as number) + (body.prompt_eval_duration as number), "durations add up");
    t.ok(Array.isArray(body.context) && (body.context as unknown[]).length > 0, "context tokens");
    t.match(body.created_at, /^\d{4}-\d\d-\d\dT/);
  });
  t.test("GET /api/version → 200 JSON", async (t) => {
    const res = await fetch(`${url}/api/version`);
    t.equal(res.status, 200);
    t.match(await res.json(), { version: /^\d+\.\d+\.\d+/ });
  });
  t.test("unknown path → 404 {error}", async (t) => {
    await assertError(t, await fetch(`${url}/api/nothing-here`), 404, "path '/api/nothing-here' not found");
    await assertError(t, await fetch(`${url}/v2/x`, { method: "POST" }), 404);
  });
  t.test("wrong method → 405 with Allow", async (t) => {
    const res = await fetch(`${url}/api/generate`);
    t.match(res.headers.get("allow"), /POST/);
    await assertError(t, res, 405, "method GET not allowed on /api/generate");
  });
  t.test("GET and HEAD /", async (t) => {
    const res = await fetch(`${url}/`);
    t.equal(res.status, 200);
    t.equal(await res.text(), "lmd is running");
    t.equal((await fetch(`${url}/`, { method: "HEAD" })).status, 200);
  });
  t.test("no 401 anywhere, even with credentials", async (t) => {
    const headers = { authorization: "Bearer nonsense", "x-api-key": "wrong", "content-type": "application/json" };
    const statuses = [
      (await fetch(`${url}/api/version`, { headers })).status,
      (await fetch(`${url}/`, { headers })).status,
      (await fetch(`${url}/api/missing`, { headers })).status,
      (await fetch(`${url}/api/generate`, { method: "POST", headers, body: "{}" })).status,
      (
        await fetch(`${url}/api/generate`, {
          method: "POST",
          headers,
          body: JSON.stringify({ model: "tiny", prompt: "x", stream: false, options: { num_predict: 1 } }),
        })
      ).status,
    ];
    t.same(statuses, [200, 200, 404, 400, 200]);
  });
});

t.test("validation follows the contract", async (t) => {
  const { url } = await startDaemon(t);
  const cases: [unknown, number, string | RegExp][] = [
    ["not json", 400, /^invalid JSON in request body: /],
    [[1, 2], 400, /^invalid JSON in request body: /],
    [{ model: "tiny", prompt: 5 }, 400, "invalid type for parameter 'prompt': expected string"],
    [{ model: "tiny", prompt: "x", stream: "yes" }, 400, "invalid type for parameter 'stream': expected boolean"],
    [{ model: "tiny", prompt: "x", options: { temperature: 3 } }, 400, "temperature must be between 0 and 2"],
    [{ model: "tiny", prompt: "x", options: { top_p: -0.1 } }, 400, "top_p must be between 0 and 1"],
    [{ model: "tiny", prompt: "x", options: { top_k: 1.5 } }, 400, "invalid type for parameter 'options.top_k': expected integer"],
    [{ model: "tiny", prompt: "x", options: { num_predict: -3 } }, 400, /^num_predict must be at least -2/],
    [{ model: "tiny", prompt: "x", options: { stop: Array(17).fill("a") } }, 400, /^stop must have at most 16 items/],
    [{ model: "tiny", prompt: "x", options: { stop: 5 } }, 400, /^invalid type for parameter 'options.stop'/],
    [{ model: "tiny", prompt: "x", keep_alive: "soon" }, 400, /^invalid value for parameter 'keep_alive'/],
    [{ model: "tiny", prompt: "x", format: "xml" }, 400, /^invalid value for parameter 'format'/],
    [{ model: "../../etc/passwd", prompt: "x" }, 400, "invalid model name '../../etc/passwd'"],
    [{ model: "a/b/c/d", prompt: "x" }, 400, "invalid model name 'a/b/c/d'"],
  ];
  for (const [body, status, message] of cases) {
    const res = await fetch(`${url}/api/generate`, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });
    await assertError(t, res, status, message);
  }
  await assertError(t, await fetch(`${url}/api/generate`, { method: "POST" }), 400, "missing request body");
  // Unknown options and unknown fields are ignored.
  const ok = await postJson(`${url}/api/generate`, { model: "TINY", prompt: "x", stream: false, whatever: 1, options: { num_predict: 2, mirostat_eta: 1 } });
  t.equal(ok.status, 200, "unknown fields ignored; names match case-insensitively");
});

t.test("generation on the real runner", async (t) => {
  const { url } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "2" } });
  const gen = async (body: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", stream: false, ...body });
    t.equal(res.status, 200, "status 200");
    return (await res.json()) as Record<string, unknown> & {
      response: string;
      eval_count: number;
      prompt_eval_count: number;
      done_reason: string;
      context: number[];
    };
  };

  t.test("same seed and temperature 0 give identical text", async (t) => {
    const a = await gen({ prompt: "Once upon a time", options: greedy });
    const b = await gen({ prompt: "Once upon a time", options: greedy });
    t.ok(a.response.length > 0);
    t.equal(a.response, b.response);
    const c = await gen({ prompt: "Once upon a time", options: { temperature: 1, seed: 3, top_k: 100, num_predict: 12 } });
    const d = await gen({ prompt: "Once upon a time", options: { temperature: 1, seed: 3, top_k: 100, num_predict: 12 } });
    t.equal(c.response, d.response, "same seed at temperature 1");
  });

  t.test("num_predict bounds eval_count", async (t) => {
    for (const n of [1, 5, 9]) {
      const r = await gen({ prompt: "Count with me", options: { ...greedy, num_predict: n } });
      t.ok(r.eval_count <= n, `eval_count ${r.eval_count} <= ${n}`);
      if (r.done_reason === "length") t.equal(r.eval_count, n, "stopped by the limit");
    }
  });

  t.test("a stop sequence ends the output", async (t) => {
    const full = await gen({ prompt: "The weather today", options: { ...greedy, num_predict: 24 } });
    const words = full.response.split(" ").filter((w) => w.length > 2);
    t.ok(words.length >= 4, `enough words to pick a stop from: ${JSON.stringify(full.response)}`);
    const stop = words[Math.floor(words.length / 2)]!;
    const cut = await gen({ prompt: "The weather today", options: { ...greedy, num_predict: 24, stop: [stop] } });
    t.equal(cut.done_reason, "stop");
    t.notOk(cut.response.includes(stop), `output does not contain the stop sequence '${stop}'`);
    t.ok(full.response.startsWith(cut.response), "output is the text before the stop sequence");
    t.equal(cut.response, full.response.slice(0, full.response.indexOf(stop)), "all of the text before it");
    // As in Ollama, a stop that starts with a space matches too: the tiny model's vocabulary is
    // SentencePiece's, where a word's token reads without its space alone (it never matched before).
    const spaced = ` ${stop}`;
    t.ok(full.response.includes(spaced), `'${spaced}' is in the output`);
    const cut2 = await gen({ prompt: "The weather today", options: { ...greedy, num_predict: 24, stop: [spaced] } });
    t.equal(cut2.done_reason, "stop", `'${spaced}' stopped the generation`);
    t.equal(cut2.response, full.response.slice(0, full.response.indexOf(spaced)), "the text before it");
  });

  t.test("the text is the tokens' pieces, the first one's leading space included (as Ollama)", async (t) => {
    // The tiny model's vocabulary is SentencePiece's: llama.cpp reads a first token "▁there" as
    // "there"; Ollama's runners send each token's piece as it is, " there".
    const decode = await ollamaDecoder(await testGguf({ preset: "tiny" }));
    for (const body of [{ prompt: "Once upon a time", raw: true }, { prompt: "The weather today" }]) {
      const r = await gen({ ...body, options: greedy });
      const generated = r.context.slice(-r.eval_count); // the context ends with the generated tokens
      t.ok(decode(generated.slice(0, 1)).startsWith(" "), `the first token's piece starts with a space: ${JSON.stringify(decode(generated.slice(0, 1)))}`);
      t.equal(r.response, decode(generated), `${JSON.stringify(body)}: the response is the pieces of the generated tokens`);
      const streamed = await readNdjson(await postJson(`${url}/api/generate`, { model: "tiny", ...body, options: greedy }));
      t.equal(streamed[0]!.response, decode(generated.slice(0, 1)), "streamed, the first chunk is the first token's piece");
    }
    const v1 = await postJson(`${url}/v1/completions`, { model: "tiny", prompt: "Once upon a time", temperature: 0, seed: 7, max_tokens: 12 });
    const raw = await gen({ prompt: "Once upon a time", raw: true, options: greedy });
    t.equal(((await v1.json()) as { choices: { text: string }[] }).choices[0]!.text, raw.response, "/v1/completions: the same text, its first space included");
  });

  t.test("format json output parses", async (t) => {
    const r = await gen({ prompt: "Give me JSON", format: "json", options: { ...greedy, num_predict: 200 } });
    t.doesNotThrow(() => JSON.parse(r.response), `parses: ${r.response.slice(0, 200)}`);
    const schema = { type: "object", properties: { ok: { type: "boolean" }, n: { type: "integer" } }, required: ["ok", "n"] };
    const s = await gen({ prompt: "Give me JSON", format: schema, options: { ...greedy, num_predict: 200 } });
    const parsed = JSON.parse(s.response) as Record<string, unknown>;
    t.type(parsed.ok, "boolean");
    t.ok(Number.isInteger(parsed.n), "n is an integer");
  });

  t.test("streaming NDJSON: chunks then one final object", async (t) => {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "Stream this", options: { ...greedy, num_predict: 6 } });
    t.match(res.headers.get("content-type"), /^application\/x-ndjson/);
    const lines = await readNdjson(res);
    const last = lines.at(-1)!;
    t.equal(last.done, true);
    t.equal(last.response, "");
    t.ok(lines.slice(0, -1).every((l) => l.done === false && typeof l.response === "string"), "chunks before the final object");
    const text = lines.map((l) => l.response).join("");
    const whole = await gen({ prompt: "Stream this", options: { ...greedy, num_predict: 6 } });
    t.equal(text, whole.response, "streamed text equals the non-streamed text");
  });

  t.test("context continues a conversation and hits the prompt cache", async (t) => {
    const first = await gen({ prompt: "My name is Ada and I like", options: greedy });
    const second = await gen({ prompt: " Tell me more", context: first.context, options: greedy });
    t.ok(second.prompt_eval_count < first.context.length, `only new tokens evaluated (${second.prompt_eval_count} < ${first.context.length})`);
  });

  t.test("raw, system and template", async (t) => {
    const raw = await gen({ prompt: "abc", raw: true, options: greedy });
    const templated = await gen({
      prompt: "abc",
      template: "{{ if .System }}{{ .System }} {{ end }}Q: {{ .Prompt }} A:",
      system: "Be brief.",
      options: greedy,
    });
    t.ok(templated.prompt_eval_count > raw.prompt_eval_count, "the template and system add tokens");
    const fimTemplate = "<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>";
    const withSuffix = await gen({ prompt: "def f(", suffix: "return the value", template: fimTemplate, options: { ...greedy, num_predict: 1 } });
    const without = await gen({ prompt: "def f(", template: fimTemplate, options: { ...greedy, num_predict: 1 } });
    t.ok(withSuffix.context.length >= without.context.length + 3, "the suffix is rendered into the prompt");
    await assertError(t, await postJson(`${url}/api/generate`, { model: "tiny", prompt: "x", suffix: "y" }), 400, "model 'tiny' does not support insert");
    // A .Messages template renders (it was a 400 before the Go template engine); a syntax error is a 400 naming the line.
    const messages = await gen({ prompt: "abc", template: "{{ range .Messages }}Q: {{ .Content }}{{ end }} A:", options: { ...greedy, num_predict: 1 } });
    const legacy = await gen({ prompt: "abc", template: "Q: {{ .Prompt }} A:", options: { ...greedy, num_predict: 1 } });
    t.same(messages.context, legacy.context, "the .Messages template renders the prompt as the legacy one does");
    const r = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "x", template: "{{ range .Messages }}\n{{ .Content " });
    await assertError(t, r, 400, "template: template:2: unclosed action");
  });

  t.test("load and unload forms", async (t) => {
    const load = (await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "" })).json()) as Record<string, unknown>;
    t.match(load, { model: "tiny", done: true, done_reason: "load", response: "" });
    const unload = (await (await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", keep_alive: 0 })).json()) as Record<string, unknown>;
    t.match(unload, { done: true, done_reason: "unload" });
  });
});

t.test("a client that disconnects frees its slot", async (t) => {
  const { url, app } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "1" } });
  const ac = new AbortController();
  const res = await postJson(
    `${url}/api/generate`,
    { model: "tiny", prompt: "Go on forever", options: { temperature: 0, num_predict: 100000 } },
    { signal: ac.signal },
  );
  const reader = res.body!.getReader();
  await reader.read(); // the first chunk: generation is running
  ac.abort();
  // With one slot, a second request can only run once the first one's slot is free.
  const started = Date.now();
  const next = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(next.status, 200, "the next request got the slot");
  t.ok(Date.now() - started < 30_000, "promptly");
  t.equal(app.services.scheduler.list()[0]?.active, 0, "no busy slot left");
});

t.test("a corrupt model file → 500 failed to load, and the daemon keeps serving", async (t) => {
  const { url, app } = await startDaemon(t);
  const bad = path.join(app.services.config.models, "bad.gguf");
  const header = Buffer.alloc(64);
  header.write("GGUF", 0, "latin1");
  header.writeUInt32LE(3, 4);
  header.writeBigUInt64LE(1n, 8); // one tensor, never described
  header.writeBigUInt64LE(0n, 16);
  await writeFile(bad, header);
  await installGguf(app.services.store, "broken", bad);
  const res = await postJson(`${url}/api/generate`, { model: "broken", prompt: "hi", stream: false });
  await assertError(t, res, 500, /^failed to load model 'broken:latest': corrupt model file: /);
  const again = await postJson(`${url}/api/generate`, { model: "broken", prompt: "hi" });
  await assertError(t, again, 500, /^failed to load model 'broken:latest'/);
  const ok = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(ok.status, 200, "other models still served");
  t.equal((await fetch(`${url}/api/version`)).status, 200);
});

t.test("a runner killed mid-stream ends that stream with an error line; the next request reloads", async (t) => {
  const { url, app } = await startDaemon(t);
  const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "Keep going", options: { temperature: 0, num_predict: 100000 } });
  const reader = res.body!.getReader();
  await reader.read();
  const pid = app.services.scheduler.list()[0]?.pid;
  t.ok(pid, "runner pid known");
  process.kill(pid!, "SIGKILL");
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  const last = JSON.parse(text.trim().split("\n").at(-1)!) as Record<string, unknown>;
  t.same(Object.keys(last), ["error"], "the last line is exactly {error}");
  t.match(last.error, /^an error occurred while running the model: the model runner stopped unexpectedly \(signal SIGKILL\)/);
  const next = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(next.status, 200, "reloaded");
  t.not(app.services.scheduler.list()[0]?.pid, pid, "in a new runner");
});
