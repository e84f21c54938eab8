/**
 * Long inputs on the real daemon: a prompt longer than the context is truncated from the front
 * with a logged warning (as Ollama does), and generation that reaches the end of the context
 * shifts the window instead of failing.
 */
import t from "tap";
import { ModelStore } from "../../src/store/store.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";
import { postJson } from "../helpers/daemon.js";

const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon".split(" ");
const longPrompt = Array.from({ length: 400 }, (_, i) => words[i % words.length]).join(" ");

t.test("long prompts and long generations on a small context", async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  // One thread: on a busy 2-core machine ggml's two threads wait for each other at every barrier.
  // SERVICE_MAX_PREDICT above the 700 tokens asked for: the default cap (4 × num_ctx 64) would stop it at 256.
  const daemon = await forkDaemon(t, {
    SERVICE_HOST: "127.0.0.1:0",
    SERVICE_MODELS: dir,
    SERVICE_THREADS: "1",
    SERVICE_NUM_PARALLEL: "1",
    SERVICE_MAX_PREDICT: "100000",
  });
  t.teardown(() => void daemon.child.kill("SIGKILL"));
  const gen = async (body: Record<string, unknown>) => {
    const res = await postJson(`${daemon.url}/api/generate`, { model: "tiny", raw: true, stream: false, ...body });
    t.equal(res.status, 200, "200");
    return (await res.json()) as { prompt_eval_count: number; eval_count: number; done_reason: string; context: number[]; response: string };
  };

  t.test("a prompt longer than num_ctx is truncated from the front and logged", async (t) => {
    const out = await gen({ prompt: longPrompt, options: { num_ctx: 128, num_predict: 4, temperature: 0 } });
    // llama.cpp rounds a context up (to a multiple of 256 here); /api/ps reports the real length.
    const ps = (await (await fetch(`${daemon.url}/api/ps`)).json()) as { models: { context_length: number }[] };
    const contextLength = ps.models[0]?.context_length ?? 0;
    t.ok(contextLength >= 128 && contextLength < 1024, `context of ${contextLength} tokens`);
    t.ok(out.prompt_eval_count < contextLength, `prompt_eval_count ${out.prompt_eval_count} fits the context`);
    t.ok(out.prompt_eval_count > contextLength / 2, "most of the context is used");
    t.ok(out.eval_count > 0, "and it generates");
    const warning = await daemon.waitForLog((l) => l.msg === "prompt longer than the context; truncated from the front", { timeoutMs: 10_000 });
    t.equal(warning.level, 40, "logged at warn");
    t.ok(typeof warning.truncated === "number" && warning.truncated > 200, `${String(warning.truncated)} tokens dropped`);
    // The end of the prompt is what was kept: its last tokens end the context that comes back.
    const full = await gen({ prompt: longPrompt, options: { num_ctx: 2048, num_predict: 1, temperature: 0 } });
    const promptTokens = full.context.slice(0, full.context.length - full.eval_count);
    const kept = out.context.slice(0, out.context.length - out.eval_count);
    t.same(kept, promptTokens.slice(promptTokens.length - kept.length), "the tokens kept are the last ones of the prompt");
  });

  t.test("generation past the end of the context shifts the window", async (t) => {
    const out = await gen({ prompt: "once upon a time", options: { num_ctx: 64, num_predict: 700, temperature: 0.8, seed: 1 } });
    const ps = (await (await fetch(`${daemon.url}/api/ps`)).json()) as { models: { context_length: number }[] };
    const contextLength = ps.models[0]?.context_length ?? Infinity;
    t.comment(`done_reason ${out.done_reason}, eval_count ${out.eval_count}, context ${contextLength}`);
    // Random weights may sample the end-of-generation token at any point (this seed does not on
    // x86-64); what matters is that the generation ran well past the end of its context.
    t.ok(out.eval_count > 2 * contextLength, `${out.eval_count} tokens generated in a context of ${contextLength}: the window moved`);
    t.match(out.done_reason, /^(length|stop)$/, "a normal end");
  });
});
