/**
 * The policy file's `num_ctx` is the context a model runs with, for everything that depends on it:
 * the load, the automatic `num_predict` cap (four contexts) and the prompt's history cut to fit,
 * which `_debug_render_only` shows without loading the model when the prompt surely fits.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import t, { type Test } from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

const CHATML = readFileSync(path.join(import.meta.dirname, "../fixtures/ollama-templates/chatml.gotmpl"), "utf8");

/** A policy file beside the test's directory (the store lives inside it). */
function policyFile(t: Test, yaml: string): string {
  const file = path.join(t.testdir(), "..", `${path.basename(t.testdirName)}-policy.yaml`);
  writeFileSync(file, yaml);
  t.teardown(() => rmSync(file, { force: true }));
  return file;
}

async function rendered(res: Response): Promise<string> {
  const body = (await res.json()) as { _debug_info?: { rendered_template?: string }; error?: string };
  if (res.status !== 200) throw new Error(`status ${res.status}: ${body.error}`);
  return body._debug_info?.rendered_template ?? "<no _debug_info>";
}

t.test("the automatic num_predict cap is four of the policy file's num_ctx", async (t) => {
  // SERVICE_CONTEXT_LENGTH alone would cap at 4 x 32 = 128 tokens.
  const policy = policyFile(t, "models:\n  tiny:\n    num_ctx: 16\n");
  const d = await startDaemon(t, { env: { SERVICE_MODELS_CONFIG: policy, SERVICE_CONTEXT_LENGTH: "32" } });
  const res = await postJson(`${d.url}/api/generate`, { model: "tiny", prompt: "hello", stream: false, options: { temperature: 0, seed: 1, num_predict: -1 } });
  const body = (await res.json()) as Record<string, unknown>;
  t.equal(body.done_reason, "length");
  t.equal(body.eval_count, 64, "4 x the policy's num_ctx 16");
  // A request's num_ctx still wins over the policy's.
  const own = await postJson(`${d.url}/api/generate`, {
    model: "tiny",
    prompt: "hello",
    stream: false,
    options: { temperature: 0, seed: 1, num_predict: -1, num_ctx: 24 },
  });
  t.equal(((await own.json()) as Record<string, unknown>).eval_count, 96, "4 x the request's num_ctx 24");
});

t.test("_debug_render_only cuts the history to the policy file's num_ctx, on /api/chat and /api/generate", async (t) => {
  // The rendered conversation (about 750 bytes) fits SERVICE_CONTEXT_LENGTH (1024), so it renders
  // without the model; it does not fit the policy's 160 tokens, so the model's tokenizer cuts it.
  const policy = policyFile(t, "models:\n  cml:\n    num_ctx: 160\n");
  const d = await startDaemon(t, { env: { SERVICE_MODELS_CONFIG: policy }, models: [{ name: "tiny", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const long = (n: number) => `turn ${n} `.repeat(12).trim();
  const messages = [1, 2, 3, 4, 5, 6].map((n) => ({ role: n % 2 ? "user" : "assistant", content: long(n) }));
  for (const model of ["cml", "wide"]) {
    const created = await postJson(`${d.url}/api/create`, {
      model,
      from: "tiny",
      template: CHATML,
      system: "Model system.",
      messages: messages.slice(0, 5),
      stream: false,
    });
    t.equal(created.status, 200, `create ${model}`);
  }

  // The model's MESSAGE lines (turns 1 to 5), then the request's message (turn 6).
  const chat = (model: string) => postJson(`${d.url}/api/chat`, { model, messages: messages.slice(5), _debug_render_only: true });
  const whole = await rendered(await chat("wide"));
  t.match(whole, /<\|im_start\|>user\nturn 1 /, "without a policy entry everything fits SERVICE_CONTEXT_LENGTH");
  const cut = await rendered(await chat("cml"));
  t.match(cut, /^<\|im_start\|>system\nModel system\.<\|im_end\|>\n<\|im_start\|>/, "the system message stays");
  t.notMatch(cut, /turn 1 /, "the oldest turn is gone: the policy's context applies");
  t.match(cut, /turn 6 turn 6/, "the last message stays");

  // /api/generate: the model's MESSAGE lines come between the system and the prompt, cut the same way.
  const generate = (model: string) => postJson(`${d.url}/api/generate`, { model, prompt: long(6), _debug_render_only: true });
  t.match(await rendered(await generate("wide")), /<\|im_start\|>user\nturn 1 /, "generate: everything fits the default context");
  const generated = await rendered(await generate("cml"));
  t.notMatch(generated, /turn 1 /, "generate: the oldest MESSAGE line is gone");
  t.match(generated, /turn 6 turn 6/, "generate: the prompt stays");
});
