/**
 * What a request asks of a model's runner is bounded, and the client's mistakes are 4xx, on the
 * real daemon and runner (src/runner/limits.ts, runner/child/generate.ts, runner/child/chat.ts):
 * stop sequences (count and length) and `format` schemas (size, enum values) over their limits
 * are 400s naming the limit; `context` ids outside the vocabulary and tools that alone overflow
 * the context are 400s (they were 500s, which clients retry).
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("runner limits and client errors", async (t) => {
  // `chat`: a chat template that shows tools (the tools capability), for the tools case.
  const { url } = await startDaemon(t, { models: [{ name: "tiny" }, { name: "chat", make: { preset: "tiny", chatTemplate: "chatml-tools" } }] });
  const hi = [{ role: "user", content: "hi" }];
  const chat = (body: Record<string, unknown>) =>
    postJson(`${url}/api/chat`, { model: "tiny", messages: hi, stream: false, ...body, options: { num_predict: 2, ...(body.options as object) } });
  t.equal((await chat({})).status, 200, "a plain chat is served");

  t.test("stop sequences", async (t) => {
    const long = "x".repeat(4097);
    await assertError(t, await chat({ options: { stop: [long] } }), 400, "stop sequence too long: 4097 characters (the limit is 4096)");
    await assertError(
      t,
      await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", raw: true, stream: false, options: { num_predict: 2, stop: [long] } }),
      400,
      "stop sequence too long: 4097 characters (the limit is 4096)",
    );
    await assertError(
      t,
      await postJson(`${url}/v1/chat/completions`, { model: "tiny", messages: hi, max_tokens: 2, stop: ["z", long] }),
      400,
      "stop sequence too long: 4097 characters (the limit is 4096)",
    );
    t.equal(
      (await chat({ options: { stop: Array.from({ length: 16 }, (_, i) => `${i}`.padEnd(4096, "y")) } })).status,
      200,
      "16 stop sequences of 4096 characters are served",
    );
  });

  t.test("format schemas", async (t) => {
    const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    await assertError(
      t,
      await chat({ format: { type: "string", enum: values(1025) } }),
      400,
      "format schema has too many alternatives: 1025 enum values and anyOf/oneOf branches (the limit is 1024)",
    );
    const nested = { type: "object", properties: { a: { enum: values(600) }, b: { anyOf: values(425).map((v) => ({ const: v })) } } };
    await assertError(
      t,
      await chat({ format: nested }),
      400,
      "format schema has too many alternatives: 1025 enum values and anyOf/oneOf branches (the limit is 1024)",
    );
    const big = { type: "object", properties: Object.fromEntries(values(3000).map((v) => [`${v}_property_name`, { type: "string" }])) };
    const res = await chat({ format: big });
    await assertError(t, res, 400, /^format schema too large: \d+ bytes of JSON \(the limit is 65536\)$/);
    t.equal((await chat({ format: { type: "string", enum: values(1024) } })).status, 200, "an enum of 1024 values is served");
  });

  t.test("context ids outside the vocabulary are a 400", async (t) => {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", context: [1, 99_999_999], stream: false, options: { num_predict: 2 } });
    await assertError(t, res, 400, "context token 99999999 is not in the model's vocabulary (size 4096)");
    const ok = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "hi", context: [1, 4095], stream: false, options: { num_predict: 2 } });
    t.equal(ok.status, 200, "ids inside it are evaluated");
  });

  t.test("tools that alone do not fit the context are a 400", async (t) => {
    const tools = Array.from({ length: 5000 }, (_, i) => ({
      type: "function",
      function: { name: `tool_${i}`, description: `does thing number ${i}`, parameters: { type: "object", properties: { x: { type: "string" } } } },
    }));
    const res = await chat({ model: "chat", tools });
    await assertError(t, res, 400, /^the tools \(5000\) and system messages take \d+ tokens, more than the context allows for a prompt \(\d+\)$/);
    t.equal((await chat({ model: "chat", tools: tools.slice(0, 2) })).status, 200, "a few tools are served");
  });
});
