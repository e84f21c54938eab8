/**
 * Ollama's own template tests (template/template_test.go), run through renderOllama: the 20
 * standard templates × the three conversations of TestTemplate, byte for byte against Ollama's
 * expected outputs (test/fixtures/ollama-templates), plus TestParse's Vars, TestExecuteWithMessages,
 * TestExecuteWithSuffix, TestCollate and the JSON-printing tests.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { parseTemplate, renderOllama, type OllamaMessage } from "../../src/template/index.js";
import { collate } from "../../src/template/ollama.js";

const FIXTURES = join(import.meta.dirname, "../fixtures/ollama-templates");

const CONVERSATIONS: Record<string, OllamaMessage[]> = {
  user: [{ role: "user", content: "Hello, how are you?" }],
  "user-assistant-user": [
    { role: "user", content: "Hello, how are you?" },
    { role: "assistant", content: "I'm doing great. How can I help you today?" },
    { role: "user", content: "I'd like to show off how chat templating works!" },
  ],
  "system-user-assistant-user": [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello, how are you?" },
    { role: "assistant", content: "I'm doing great. How can I help you today?" },
    { role: "user", content: "I'd like to show off how chat templating works!" },
  ],
};
// Ollama's test drops one trailing space from these templates' output before comparing.
const TRIM_TRAILING_SPACE = new Set(["chatqa.gotmpl", "llama2-chat.gotmpl", "mistral-instruct.gotmpl", "openchat.gotmpl", "vicuna.gotmpl"]);

t.test("the 20 templates of Ollama's template/ folder render its three test conversations byte for byte", async (t) => {
  const files = readdirSync(FIXTURES).filter((f) => f.endsWith(".gotmpl")).sort();
  t.equal(files.length, 20);
  for (const file of files) {
    // Ollama normalises CRLF when it loads these files.
    const tmpl = parseTemplate(readFileSync(join(FIXTURES, file), "utf8").replaceAll("\r\n", "\n"), file);
    for (const [name, messages] of Object.entries(CONVERSATIONS)) {
      let got = renderOllama(tmpl, { messages });
      if (TRIM_TRAILING_SPACE.has(file) && got.endsWith(" ")) got = got.slice(0, -1);
      t.equal(got, readFileSync(join(FIXTURES, "testdata", file, name), "utf8"), `${file} ${name}`);
    }
  }
});

t.test("Vars() as Ollama's TestParse expects, including the appended .Response", async (t) => {
  const cases: [string, string[]][] = [
    ["{{ .Prompt }}", ["prompt", "response"]],
    ["{{ .System }} {{ .Prompt }}", ["prompt", "response", "system"]],
    ["{{ .System }} {{ .Prompt }} {{ .Response }}", ["prompt", "response", "system"]],
    ["{{ with .Tools }}{{ . }}{{ end }} {{ .System }} {{ .Prompt }}", ["prompt", "response", "system", "tools"]],
    ["{{ range .Messages }}{{ .Role }} {{ .Content }}{{ end }}", ["content", "messages", "role"]],
    ['{{ range .Messages }}{{ if eq .Role "tool" }}Tool Result: {{ .ToolName }} {{ .Content }}{{ end }}{{ end }}', ["content", "messages", "role", "toolname"]],
    ["{{ range $i, $m := .Messages }}{{ $m.Content }}{{ end }}", ["$m", "content", "messages"]],
  ];
  for (const [src, vars] of cases) t.same([...parseTemplate(src).vars()].sort(), vars, src);
});

t.test("parse errors as Ollama's TestParseError", async (t) => {
  t.throws(() => parseTemplate("{{ .Prompt "), { name: "BadRequestError", status: 400, message: "template: template:1: unclosed action" });
  t.throws(() => parseTemplate('{{define "x"}}{{template "x"}}{{end}}{{template "x"}}'), { status: 400, message: /undefined template specified/ });
});

const MISTRAL_MESSAGES: OllamaMessage[] = [
  { role: "user", content: "Hello friend!" },
  { role: "assistant", content: "Hello human!" },
  { role: "user", content: "What is your name?" },
];

t.test("TestExecuteWithMessages: legacy and .Messages templates agree", async (t) => {
  const mistral = {
    "no response": "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] ",
    response: "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] {{ .Response }}",
    messages:
      '[INST] {{ if .System }}{{ .System }}\n\n{{ end }}\n{{- range .Messages }}\n{{- if eq .Role "user" }}{{ .Content }}[/INST] {{ else if eq .Role "assistant" }}{{ .Content }}[INST] {{ end }}\n{{- end }}',
  };
  for (const [name, src] of Object.entries(mistral)) {
    t.equal(
      renderOllama(parseTemplate(src), { messages: MISTRAL_MESSAGES }),
      "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] ",
      `mistral ${name}`,
    );
    t.equal(
      renderOllama(parseTemplate(src), { messages: [{ role: "system", content: "You are a helpful assistant!" }, ...MISTRAL_MESSAGES] }),
      "[INST] You are a helpful assistant!\n\nHello friend![/INST] Hello human![INST] What is your name?[/INST] ",
      `mistral system ${name}`,
    );
  }
  const assistant = [...MISTRAL_MESSAGES, { role: "assistant", content: "My name is Ollama and I" }];
  for (const src of [
    "[INST] {{ .Prompt }}[/INST] ",
    "[INST] {{ .Prompt }}[/INST] {{ .Response }}",
    '\n{{- range $i, $m := .Messages }}\n{{- if eq .Role "user" }}[INST] {{ .Content }}[/INST] {{ else if eq .Role "assistant" }}{{ .Content }}{{ end }}\n{{- end }}',
  ]) {
    t.equal(
      renderOllama(parseTemplate(src), { messages: assistant }),
      "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] My name is Ollama and I",
      `assistant prefill: ${JSON.stringify(src.slice(0, 30))}`,
    );
  }
  const chatml = [
    "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n",
    "\n{{- range $index, $_ := .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n",
  ];
  for (const src of chatml) {
    t.equal(
      renderOllama(parseTemplate(src), { messages: [{ role: "system", content: "You are a helpful assistant!" }, ...MISTRAL_MESSAGES] }),
      "<|im_start|>system\nYou are a helpful assistant!<|im_end|>\n<|im_start|>user\nHello friend!<|im_end|>\n<|im_start|>assistant\nHello human!<|im_end|>\n<|im_start|>user\nWhat is your name?<|im_end|>\n<|im_start|>assistant\n",
    );
  }
});

t.test("TestExecuteWithSuffix: prompt + suffix reach the template as .Prompt and .Suffix", async (t) => {
  const tmpl = parseTemplate("{{- if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>\n{{- else }}{{ .Prompt }}\n{{- end }}");
  t.equal(renderOllama(tmpl, { messages: [{ role: "user", content: "hello" }] }), "hello");
  t.equal(renderOllama(tmpl, { messages: [], prompt: "def add(", suffix: "return x" }), "<PRE> def add( <SUF>return x <MID>");
});

t.test("TestCollate: same-role messages merge, tool messages do not, systems are joined", async (t) => {
  const { system, messages } = collate([
    { role: "system", content: "You are helpful" },
    { role: "system", content: "Be brief" },
    { role: "user", content: "Hello" },
    { role: "user", content: "How are you?" },
    { role: "tool", content: "sunny", tool_name: "get_weather" },
    { role: "tool", content: "72F", tool_name: "get_temperature" },
  ]);
  t.equal(system, "You are helpful\n\nBe brief");
  t.same(
    collate([
      { role: "User", content: "a" },
      { role: "USER", content: "b" },
    ]).messages,
    [{ role: "user", content: "a\n\nb" }],
    "roles are lower-cased, as Ollama decodes them",
  );
  t.same(messages?.map((m) => [m.role, m.content, m.tool_name]), [
    ["system", "You are helpful\n\nBe brief", undefined],
    ["user", "Hello\n\nHow are you?", undefined],
    ["tool", "sunny", "get_weather"],
    ["tool", "72F", "get_temperature"],
  ]);
});

t.test("tool calls and tools print as Go's JSON (String methods), sorted keys and HTML-escaped", async (t) => {
  const out = renderOllama(
    parseTemplate(
      "{{- range .Messages }}{{- range .ToolCalls }}{{ .Function.Name }}{{ .Function.Arguments }}|{{ json .Function.Arguments }}|{{ .Function.Index }}{{- end }}{{- end }}",
    ),
    {
      messages: [
        {
          role: "assistant",
          content: "",
          tool_calls: [{ function: { index: 2, name: "get_weather", arguments: { unit: "celsius", location: "Tokyo <&>" } } }],
        },
      ],
    },
  );
  t.equal(out, 'get_weather{"location":"Tokyo \\u003c\\u0026\\u003e","unit":"celsius"}|{"location":"Tokyo \\u003c\\u0026\\u003e","unit":"celsius"}|2');
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Get weather",
        parameters: {
          type: "object",
          required: ["location"],
          properties: { location: { type: "string", description: "City name" }, days: { type: ["integer", "null"], enum: [1, 2] } },
        },
      },
    },
  ];
  const tmpl = parseTemplate(
    "{{- range .Messages }}{{- end }}{{ .Tools }}\n{{- range .Tools }}\n{{ .Function.Parameters.Properties }}\n{{- range $k, $v := .Function.Parameters.Properties }}\n{{ $k }}: {{ $v.Type }} {{ toTypeScriptType $v }} {{ $v.ToTypeScriptType }} {{ $v.Description }}{{ end }}{{ end }}",
  );
  t.equal(
    renderOllama(tmpl, { messages: [{ role: "user", content: "x" }], tools }),
    '[{"type":"function","function":{"name":"get_weather","description":"Get weather","parameters":{"type":"object","required":["location"],"properties":{"days":{"type":["integer","null"],"enum":[1,2]},"location":{"type":"string","description":"City name"}}}}}]\n' +
      '{"days":{"type":["integer","null"],"enum":[1,2]},"location":{"type":"string","description":"City name"}}\n' +
      "days: [integer null] number | null number | null \n" +
      "location: string string string City name",
  );
  t.equal(
    renderOllama(parseTemplate("{{ range .Messages }}{{ end }}{{ .Tools }}|{{ json .Tools }}|{{ if .Tools }}yes{{ else }}no{{ end }}"), { messages: [] }),
    "null|null|no",
  );
});
