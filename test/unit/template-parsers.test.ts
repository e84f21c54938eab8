/**
 * The output parsers of Go-template models, against cases of Ollama's own tests: tools/tools_test.go
 * (the call tag taken from the template's `.ToolCalls` section, calls parsed from whole and
 * streamed output) and thinking/parser_test.go + template_test.go (tags inferred, thoughts split).
 */
import t from "tap";
import { parseTemplate } from "../../src/template/index.js";
import { inferThinkingTags, ThinkingParser } from "../../src/template/thinking.js";
import { toolCallTag, ToolCallParser, type ParsedToolCall } from "../../src/template/tools.js";

const tmpl = (s: string) => parseTemplate(s, "t", { appendResponse: false }).root;
const qwen = tmpl(
  `{{if .ToolCalls}}<tool_call>{{range .ToolCalls}}{"name": "{{.Function.Name}}", "arguments": {{.Function.Arguments}}}{{end}}</tool_call>{{end}}`,
);
const deepseek = tmpl(
  '{{if .ToolCalls}}<|tool▁calls▁begin|>{{range .ToolCalls}}<|tool▁call▁begin|>function<|tool▁sep|>get_current_weather\n```json\n{"location": "Tokyo"}\n```<|tool▁call▁end|>{{end}}<|tool▁calls▁end|><|end▁of▁sentence|>{{end}}',
);
const json = tmpl(`{{if .ToolCalls}}{{range .ToolCalls}}{"name": "{{.Function.Name}}", "arguments": {{.Function.Arguments}}}{{end}}{{end}}`);
const mistral = tmpl(
  `{{if .ToolCalls}}[TOOL_CALLS] [{{range .ToolCalls}}{"name": "{{.Function.Name}}", "arguments": {{.Function.Arguments}}}{{end}}][/TOOL_CALLS]{{end}}`,
);
const list = tmpl(`{{if .ToolCalls}}[{{range .ToolCalls}}{"name": "{{.Function.Name}}", "arguments": {{.Function.Arguments}}}{{end}}]{{end}}`);
const NAMES = ["get_temperature", "get_conditions", "say_hello", "say_hello_world", "get_address", "add"];

function run(root: ReturnType<typeof tmpl>, inputs: string[]): { content: string; calls: ParsedToolCall[] } {
  const p = new ToolCallParser(toolCallTag(root), NAMES);
  let content = "";
  const calls: ParsedToolCall[] = [];
  for (const s of inputs) {
    const r = p.add(s);
    content += r.content;
    calls.push(...r.calls);
  }
  return { content: content + p.content(), calls };
}

t.test("the call tag comes from the template's .ToolCalls section", async (t) => {
  t.equal(toolCallTag(qwen), "<tool_call>");
  t.equal(toolCallTag(deepseek), "<|tool▁calls▁begin|>");
  t.equal(toolCallTag(json), "{");
  t.equal(toolCallTag(mistral), "[TOOL_CALLS] [");
  t.equal(toolCallTag(list), "[");
  t.equal(toolCallTag(tmpl("{{ .Prompt }}")), "{");
});

t.test("calls and content as Ollama's TestParser expects", async (t) => {
  t.same(run(qwen, [`Let me check the weather. <tool_call>{"name": "get_temperature", "arguments": {"city": "New York"}}</tool_call>`]), {
    content: "Let me check the weather. ",
    calls: [{ index: 0, name: "get_temperature", arguments: { city: "New York" } }],
  });
  t.same(run(qwen, ["Let me say hello to the user. I'll use the say_hello tool. "]), {
    content: "Let me say hello to the user. I'll use the say_hello tool. ",
    calls: [],
  });
  const calls = `[{"name": "get_temperature", "arguments": {"city": "London", "format": "fahrenheit"}}, {"name": "get_conditions", "arguments": {"location": "Tokyo"}}]`;
  t.same(run(mistral, [`[TOOL_CALLS] ${calls}[/TOOL_CALLS]`]), {
    content: "",
    calls: [
      { index: 0, name: "get_temperature", arguments: { city: "London", format: "fahrenheit" } },
      { index: 1, name: "get_conditions", arguments: { location: "Tokyo" } },
    ],
  });
  t.same(
    run(qwen, [
      `Let me say hello and check the weather. <tool_call>{"name": "say_hello", "arguments": {}}</tool_call><tool_call>{"name": "get_temperature", "arguments": {"city": "London", "format": "fahrenheit"}}</tool_call>`,
    ]).calls,
    [
      { index: 0, name: "say_hello", arguments: {} },
      { index: 1, name: "get_temperature", arguments: { city: "London", format: "fahrenheit" } },
    ],
  );
});

t.test("streamed: content before the tag streams, a partial tag is held back", async (t) => {
  const chunks = [
    "<think>Wait",
    ", I need",
    " to call",
    " a tool</think><|too",
    "l▁calls▁begin",
    "|>",
    "<|tool▁call▁begin|>function<|tool▁sep|>get_temperature\n",
    "```json\n",
    '{"city": "Tokyo"}\n',
    "```",
    "<|tool▁c",
    "all▁end|>",
    "<|tool▁calls▁end|>",
    "<|end▁of▁sentence|>",
  ];
  const p = new ToolCallParser(toolCallTag(deepseek), NAMES);
  t.same(
    chunks.slice(0, 5).map((c) => p.add(c).content),
    ["<think>Wait", ", I need", " to call", " a tool</think>", ""],
    "`<|too` waits for the rest of the tag",
  );
  t.same(run(deepseek, chunks), {
    content: "<think>Wait, I need to call a tool</think>",
    calls: [{ index: 0, name: "get_temperature", arguments: { city: "Tokyo" } }],
  });
  t.same(run(json, ["{", '"name": "get_temperature",', '"arguments": {', '"city": "Tokyo"', "}", "}"]), {
    content: "",
    calls: [{ index: 0, name: "get_temperature", arguments: { city: "Tokyo" } }],
  });
  // JSON that names no tool is content after all; text before `{` means no call at all.
  t.same(run(json, ["{", '"name": "search", ', '"arguments": {', '"query": "x"', "}", "}"]), {
    content: `{"name": "search", "arguments": {"query": "x"}}`,
    calls: [],
  });
  t.same(run(json, [`Sure: {"name": "get_temperature", "arguments": {"city": "Tokyo"}}`]).calls, []);
});

t.test("thinking tags are inferred from the template, and the output is split", async (t) => {
  const qwen3 = tmpl(`{{- range $i, $_ := .Messages }}{{- if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}<|im_end|>
{{ end }}{{ end }}`);
  t.same(inferThinkingTags(qwen3), ["<think>", "</think>"]);
  t.same(inferThinkingTags(json), ["", ""]);
  const p = new ThinkingParser("<think>", "</think>");
  const parts = ["  <thi", "nk>\n I should", " greet </th", "ink>\n\nHello", " there"].map((c) => p.add(c));
  t.same(parts, [["", ""], ["I should", ""], [" greet ", ""], ["", "Hello"], ["", " there"]]);
  // No opening tag: everything is content, untouched.
  const q = new ThinkingParser("<think>", "</think>");
  t.same(q.add("  Hi <think>"), ["", "  Hi <think>"]);
});
