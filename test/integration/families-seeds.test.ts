/**
 * On the real daemon and runner: `images` on /api/generate is refused
 * (node-llama-cpp has no vision), and a request without `seed` draws a fresh random seed while
 * a request with one reproduces.
 */
import { setTimeout as sleep } from "node:timers/promises";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("seeds and images", async (t) => {
  // Two slots: the unseeded pair runs at the same moment, inside one wall-clock second.
  const { url } = await startDaemon(t, { env: { SERVICE_NUM_PARALLEL: "2" }, models: [{ name: "tiny" }] });
  const generate = async (options: Record<string, unknown>) => {
    const res = await postJson(`${url}/api/generate`, {
      model: "tiny",
      prompt: "Once upon a time",
      stream: false,
      options: { num_predict: 16, temperature: 1.5, top_k: 0, top_p: 1, ...options },
    });
    const body = (await res.json()) as { response: string; error?: string };
    t.equal(res.status, 200, body.error ?? "generated");
    return body.response;
  };

  t.test("images on generate → 400", async (t) => {
    await assertError(
      t,
      await postJson(`${url}/api/generate`, { model: "tiny", prompt: "describe", images: ["aGk="] }),
      400,
      "model 'tiny' does not support images",
    );
    const ok = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", images: [], stream: false, options: { num_predict: 1 } });
    t.equal(ok.status, 200, "an empty images list is no image");
  });

  t.test("two unseeded requests differ", async (t) => {
    await generate({ num_predict: 1 }); // loaded: both requests start generating at once
    // Start just after a second boundary: node-llama-cpp's own default seed is the current second,
    // which made two such requests identical before lmd drew a seed per request.
    await sleep(1000 - (Date.now() % 1000) + 20);
    const [a, b] = await Promise.all([generate({}), generate({})]);
    t.ok(a.length > 0 && b.length > 0, "both generated text");
    t.not(a, b, "different text from two unseeded requests in the same second");
  });

  t.test("two seeded requests agree", async (t) => {
    const a = await generate({ seed: 42 });
    const b = await generate({ seed: 42 });
    t.equal(a, b, "same seed, same text");
    t.not(await generate({ seed: 43 }), a, "another seed, other text");
  });
});
