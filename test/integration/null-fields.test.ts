/**
 * Ollama's endpoints read a body as Ollama's Go server does: a field set to null is a field not set
 * (clients in Python, Java or Rust often write every unset field as null), in the body, its options
 * and its messages, and a message's role in any case. A missing or null `prompt` is still the
 * seed's 400.
 */
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

t.test("null fields count as not set on Ollama's endpoints", async (t) => {
  const { url } = await startDaemon(t);
  const unset = { format: null, system: null, template: null, context: null, keep_alive: null, think: null, raw: null, suffix: null, images: null };
  const options = { num_predict: 2, temperature: null, top_k: null, stop: null, seed: 7 };

  const generate = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "Hello", stream: false, ...unset, options });
  t.equal(generate.status, 200, "generate");
  const g = (await generate.json()) as { response: string; eval_count: number; done: boolean };
  t.ok(g.done && g.eval_count > 0, `generate answered (${g.eval_count} tokens)`);
  const withoutNulls = { model: "tiny", prompt: "Hello", stream: false, options: { num_predict: 2, seed: 7 } };
  const plain = (await (await postJson(`${url}/api/generate`, withoutNulls)).json()) as { response: string };
  t.equal(g.response, plain.response, "the same answer as without the null fields");

  const messages = [
    { role: "System", content: "Be brief.", images: null, tool_calls: null, thinking: null },
    { role: "USER", content: "Hi", tool_name: null },
  ];
  const chatBody = { model: "tiny", messages, stream: false, tools: null, format: null, options, logprobs: null, top_logprobs: null };
  const chat = await postJson(`${url}/api/chat`, chatBody);
  t.equal(chat.status, 200, "chat");
  t.equal(((await chat.json()) as { message: { role: string } }).message.role, "assistant");

  const show = await postJson(`${url}/api/show`, { model: "tiny", verbose: null, system: null });
  t.equal(show.status, 200, "show");

  await assertError(t, await postJson(`${url}/api/generate`, { model: "tiny", prompt: null }), 400, "prompt is required");
  await assertError(
    t,
    await postJson(`${url}/api/chat`, { model: "tiny", messages: [{ role: "robot", content: "hi" }] }),
    400,
    "invalid value for parameter 'messages[0].role': expected one of system, user, assistant, tool",
  );
  await assertError(t, await postJson(`${url}/api/chat`, { model: "tiny", messages: [{ role: null, content: "hi" }] }), 400, "messages[0].role is required");
});
