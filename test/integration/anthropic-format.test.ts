/**
 * Anthropic structured output: `output_config.format` (`json_schema`), which the official SDK's
 * `messages.parse` and `messages.stream` send, constrains the answer's text to JSON matching the
 * schema, by grammar, as `format` does on /api/chat; the SDK then parses it into `parsed_output`.
 * The beta name `output_format` is honoured alike.
 */
import Anthropic from "@anthropic-ai/sdk";
import { jsonSchemaOutputFormat } from "@anthropic-ai/sdk/helpers/json-schema";
import { Ajv } from "ajv";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

/** Bounded values only: random weights rarely close a free string. */
const SCHEMA = {
  type: "object",
  properties: {
    answer: { type: "integer" },
    sure: { type: "boolean" },
    mood: { enum: ["calm", "busy"] },
    scores: { type: "array", items: { type: "number" }, maxItems: 3 },
  },
  required: ["answer", "sure", "mood", "scores"],
  additionalProperties: false,
} as const;

t.test("output_config.format constrains the answer and the SDK parses it", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "chat", make: { preset: "tiny", chatTemplate: "chatml" } }] });
  const client = new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0 });
  // The SDK moves what strict structured output does not support (maxItems) into a description:
  // the answer must match the schema as sent.
  const format = jsonSchemaOutputFormat(SCHEMA);
  const check = new Ajv({ strict: false }).compile(format.schema);
  const base = { model: "chat", max_tokens: 300, temperature: 1, messages: [{ role: "user" as const, content: "How many?" }] };

  for (let i = 0; i < 5; i++) {
    const message = await client.messages.parse({ ...base, output_config: { format } });
    t.ok(check(message.parsed_output), `parse #${i + 1}: ${JSON.stringify(message.parsed_output)}`);
    t.equal(message.content.length, 1, "one text block");
  }
  const streamed = await client.messages.stream({ ...base, output_config: { format } }).finalMessage();
  t.ok(check(streamed.parsed_output), `stream: ${JSON.stringify(streamed.parsed_output)}`);

  const beta = await postJson(`${url}/v1/messages`, { ...base, output_format: { type: "json_schema", schema: SCHEMA } });
  const body = (await beta.json()) as { content: { type: string; text: string }[] };
  t.ok(new Ajv({ strict: false }).compile(SCHEMA)(JSON.parse(body.content[0]?.text ?? "null")), `output_format (beta): ${body.content[0]?.text}`);

  const bad = await postJson(`${url}/v1/messages`, { ...base, output_config: { format: { type: "json_schema" } } });
  await assertError(t, bad, 400, /output_config\/format must have required property 'schema'|schema/);
});
