/**
 * Forced tool calls and `format` produce arguments that match the client's schema: integers are
 * whole numbers written without fraction or exponent, numbers are finite (a sixteen-digit exponent
 * parses to Infinity, which JSON writes as null), nested objects and arrays hold the same. Each
 * surface that forces a call — `/v1/chat/completions` and `/v1/responses` with `tool_choice:
 * "required"`, `/v1/messages` with `tool_choice: {type: "any"}`, through the GGUF's chat template
 * (node-llama-cpp's function calling) and through a Go template (a grammar for the call object) —
 * and `format` on `/api/chat` is sampled at 20 seeds, and every answer is validated with ajv
 * against the schema that was sent. The official `openai` and `@anthropic-ai/sdk` clients make the
 * same calls.
 */
import Anthropic from "@anthropic-ai/sdk";
import { Ajv } from "ajv";
import OpenAI from "openai";
import t, { type Test } from "tap";
import { postJson, startDaemon } from "../helpers/daemon.js";

/** Integer, number, a nested object and an array; no free strings (random weights rarely close one). */
const PARAMS = {
  type: "object",
  properties: {
    count: { type: "integer" },
    ratio: { type: "number" },
    place: {
      type: "object",
      properties: { floor: { type: "integer" }, height: { type: "number" } },
      required: ["floor", "height"],
      additionalProperties: false,
    },
    ids: { type: "array", items: { type: "integer" }, maxItems: 3 },
    unit: { enum: ["m", "ft"] },
  },
  required: ["count", "ratio", "place", "ids", "unit"],
  additionalProperties: false,
} as const;

const SEEDS = Array.from({ length: 20 }, (_, i) => i + 1);
const user = "Measure it.";
const MAX = 400;

t.test("forced tool calls and format match the schema on every surface", async (t) => {
  const { url } = await startDaemon(t, { models: [{ name: "tools", make: { preset: "tiny", chatTemplate: "chatml-tools" } }] });
  const check = new Ajv({ strict: false }).compile(PARAMS);
  /** One answer's arguments are valid for the schema (a number written as null fails it). */
  const valid = (t: Test, what: string, args: unknown) => {
    const ok = check(args);
    t.ok(ok, `${what}: ${JSON.stringify(args)} ${ok ? "" : JSON.stringify(check.errors)}`);
  };

  // A Go template whose calls are bare JSON objects: tool_choice is enforced by a grammar for the call.
  const template =
    '{{ if .Tools }}<|im_start|>system\nTools: {{ json .Tools }}<|im_end|>\n{{ end }}{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ json .Function.Arguments }}}{{ end }}<|im_end|>\n{{ end }}<|im_start|>assistant\n';
  t.equal((await postJson(`${url}/api/create`, { model: "go-tools", from: "tools", template, stream: false })).status, 200, "the Go template model");
  const completions = (model: string) => async (seed: number) => {
    const body = {
      model,
      seed,
      temperature: 1,
      max_tokens: MAX,
      messages: [{ role: "user", content: user }],
      tools: [{ type: "function", function: { name: "measure", parameters: PARAMS } }],
      tool_choice: "required",
    };
    const res = await postJson(`${url}/v1/chat/completions`, body);
    const json = (await res.json()) as { choices?: { message: { tool_calls?: { function: { arguments: string } }[] } }[]; error?: string };
    if (res.status !== 200) throw new Error(`${res.status} ${json.error}`);
    return JSON.parse(json.choices?.[0]?.message.tool_calls?.[0]?.function.arguments ?? "null");
  };

  const surfaces: [string, (seed: number) => Promise<unknown>][] = [
    ["/v1/chat/completions", completions("tools")],
    ["/v1/chat/completions, Go template", completions("go-tools")],
    [
      "/v1/responses",
      async (seed) => {
        // The Responses API has no seed field: the input varies instead.
        const body = {
          model: "tools",
          temperature: 1,
          max_output_tokens: MAX,
          input: `${user} (${seed})`,
          tools: [{ type: "function", name: "measure", parameters: PARAMS }],
          tool_choice: "required",
        };
        const res = await postJson(`${url}/v1/responses`, body);
        const json = (await res.json()) as { output?: { type: string; arguments?: string }[]; error?: string };
        if (res.status !== 200) throw new Error(`${res.status} ${json.error}`);
        return JSON.parse(json.output?.find((o) => o.type === "function_call")?.arguments ?? "null");
      },
    ],
    [
      "/v1/messages",
      async (seed) => {
        const body = {
          model: "tools",
          temperature: 1,
          max_tokens: MAX,
          messages: [{ role: "user", content: `${user} (${seed})` }],
          tools: [{ name: "measure", input_schema: PARAMS }],
          tool_choice: { type: "any" },
        };
        const res = await postJson(`${url}/v1/messages`, body);
        const json = (await res.json()) as { content?: { type: string; input?: unknown }[]; error?: string };
        if (res.status !== 200) throw new Error(`${res.status} ${json.error}`);
        return json.content?.find((b) => b.type === "tool_use")?.input ?? null;
      },
    ],
    [
      "/api/chat format",
      async (seed) => {
        const body = {
          model: "tools",
          stream: false,
          format: PARAMS,
          options: { seed, temperature: 1, num_predict: MAX },
          messages: [{ role: "user", content: user }],
        };
        const res = await postJson(`${url}/api/chat`, body);
        const json = (await res.json()) as { message?: { content: string }; error?: string };
        if (res.status !== 200) throw new Error(`${res.status} ${json.error}`);
        return JSON.parse(json.message?.content ?? "null");
      },
    ],
  ];
  for (const [surface, ask] of surfaces) {
    await t.test(surface, async (t) => {
      for (const seed of SEEDS) {
        try {
          valid(t, `seed ${seed}`, await ask(seed));
        } catch (err) {
          t.fail(`seed ${seed}: ${String(err)}`);
        }
      }
    });
  }

  await t.test("the official clients, tool_choice required with an integer parameter", async (t) => {
    const tool = { name: "measure", description: "Measures a room", parameters: PARAMS };
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const chat = await openai.chat.completions.create({
      model: "tools",
      seed: 7,
      max_tokens: MAX,
      messages: [{ role: "user", content: user }],
      tools: [{ type: "function", function: tool }],
      tool_choice: "required",
    });
    const call = chat.choices[0]?.message.tool_calls?.[0];
    t.equal(call?.type === "function" ? call.function.name : undefined, "measure", "openai chat.completions: the call");
    valid(t, "openai chat.completions", JSON.parse(call?.type === "function" ? call.function.arguments : "null"));

    const response = await openai.responses.create({
      model: "tools",
      max_output_tokens: MAX,
      input: user,
      tools: [{ type: "function", ...tool, strict: true }],
      tool_choice: "required",
    });
    const item = response.output.find((o) => o.type === "function_call");
    t.equal(item?.name, "measure", "openai responses: the call");
    valid(t, "openai responses", JSON.parse(item?.arguments ?? "null"));

    const anthropic = new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0 });
    const message = await anthropic.messages.create({
      model: "tools",
      max_tokens: MAX,
      messages: [{ role: "user", content: user }],
      tools: [{ name: "measure", input_schema: PARAMS }],
      tool_choice: { type: "any" },
    });
    const use = message.content.find((b) => b.type === "tool_use");
    t.equal(use?.name, "measure", "anthropic messages: the call");
    t.equal(message.stop_reason, "tool_use");
    valid(t, "anthropic messages", use?.input);
  });
});
