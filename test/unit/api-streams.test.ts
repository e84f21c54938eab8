/**
 * The event builders of `/v1/messages` and `/v1/responses` read by the official SDKs' stream
 * accumulators, over a real socket: thinking then text then a tool call (the test models have no
 * thought segments, so this is where thinking blocks and reasoning items are checked), and an
 * error after the stream started, which each SDK must raise rather than end quietly.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import t from "tap";
import { endStreamWithError, NamedSseStream } from "../../src/http/respond.js";
import { MessageEvents } from "../../src/routes/anthropic/stream.js";
import { ResponseOutput } from "../../src/routes/openai/responses-stream.js";

const call = { name: "get_weather", arguments: { city: "Paris" } };

function serve(res: ServerResponse, path: string): void {
  const stream = new NamedSseStream(res);
  const emit = (event: { type: string }) => void stream.write(event);
  const broken = path.startsWith("/broken");
  if (path.endsWith("/messages")) {
    const events = new MessageEvents({ id: "msg_1", model: "m" }, emit);
    events.thinking("Let me");
    events.thinking(" think.");
    events.text("Hi");
    if (broken) return endStreamWithError(res, "an error occurred while running the model: boom");
    events.text(" there");
    events.finish([{ type: "tool_use", id: "toolu_1", name: call.name, input: call.arguments }], "tool_use", null, { input_tokens: 5, output_tokens: 7 });
  } else {
    const output = new ResponseOutput({ model: "m" }, emit);
    output.reasoning("Let me think.");
    output.text("Hi");
    if (broken) return endStreamWithError(res, "an error occurred while running the model: boom");
    output.text(" there");
    output.finish([call], false, { input_tokens: 5, output_tokens: 7, total_tokens: 12 });
  }
  stream.end();
}

t.test("SDK stream accumulators read the builders' events", async (t) => {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => req.resume().on("end", () => serve(res, req.url ?? "")));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const params = { model: "m", max_tokens: 10, messages: [{ role: "user" as const, content: "hi" }] };

  t.test("anthropic: thinking, text and tool_use blocks", async (t) => {
    const client = new Anthropic({ baseURL: url, apiKey: "x", maxRetries: 0 });
    const final = await client.messages.stream(params).finalMessage();
    t.same(final.content, [
      { type: "thinking", thinking: "Let me think.", signature: "" },
      { type: "text", text: "Hi there" },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
    ]);
    t.match(final, { stop_reason: "tool_use", usage: { input_tokens: 5, output_tokens: 7 } });

    const broken = new Anthropic({ baseURL: `${url}/broken`, apiKey: "x", maxRetries: 0 });
    const err = await broken.messages.stream(params).finalMessage().catch((e: unknown) => e);
    t.ok(err instanceof Anthropic.APIError, "an error event is raised by the SDK");
    t.match(err, { error: { error: "an error occurred while running the model: boom" } });
  });

  t.test("openai responses: reasoning, message and function_call items", async (t) => {
    const client = new OpenAI({ baseURL: url, apiKey: "x", maxRetries: 0 });
    const final = await client.responses.stream({ model: "m", input: "hi" }).finalResponse();
    t.same(final.output.map((o) => o.type), ["reasoning", "message", "function_call"]);
    t.equal(final.output_text, "Hi there");
    t.match(final.output[0], { content: [{ type: "reasoning_text", text: "Let me think." }] });
    t.match(final.output[2], { name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" });

    const broken = new OpenAI({ baseURL: `${url}/broken`, apiKey: "x", maxRetries: 0 });
    const err = await broken.responses.stream({ model: "m", input: "hi" }).finalResponse().catch((e: unknown) => e);
    t.ok(err instanceof OpenAI.APIError, "an error event is raised by the SDK");
    t.match(err, { message: /boom/ });
  });
});

t.test("a response's message item ends as the response does: completed, or incomplete at the limit", async (t) => {
  for (const incomplete of [false, true]) {
    const events: { type: string; item?: { type: string; status?: string } }[] = [];
    const output = new ResponseOutput({ model: "m" }, (e) => events.push(e as (typeof events)[number]));
    output.reasoning("Hm.");
    output.text("Hi");
    const response = output.finish([], incomplete, {}) as { status: string; output: { type: string; status?: string }[] };
    const status = incomplete ? "incomplete" : "completed";
    t.equal(response.status, status);
    t.match(response.output, [{ type: "reasoning" }, { type: "message", status }], `the message item is ${status}`);
    t.match(
      events.filter((e) => e.type === "response.output_item.done").map((e) => e.item),
      [{ type: "reasoning" }, { type: "message", status }],
      "and its output_item.done event",
    );
    // Nothing written at all: the empty message stands for the answer, with the same status.
    const empty = new ResponseOutput({ model: "m" }).finish([], incomplete, {}) as { output: { type: string; status?: string }[] };
    t.match(empty.output, [{ type: "message", status }]);
  }
});
