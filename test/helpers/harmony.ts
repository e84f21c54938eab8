/**
 * A gpt-oss-shaped test model: Qwen2's BPE vocabulary with harmony's special tokens added (o200k's
 * own file is not among llama.cpp's vocabularies; llama.cpp keys its harmony handling on the tokens'
 * text: `<|channel|>`, `<|message|>`, `<|start|>` and `<|constrain|>` are always written out,
 * `<|return|>` and `<|call|>` end a generation, `<|end|>` does not), installed with the gpt-oss
 * family in its config and a Go template in harmony's format written for these tests after the
 * shape of Ollama's gpt-oss template (system with the reasoning level, developer with the
 * instructions and the tools as a TypeScript namespace, analysis/final/commentary messages, an
 * open last assistant message as the prefill).
 */
import { readTokenizer, withAddedTokens } from "../../src/gguf/family-vocab.js";
import type { MakeModelOptions } from "../../src/gguf/make-model.js";
import { vocabPath } from "./families.js";
import { llamaSrc } from "./llama-src.js";

export const HARMONY_TOKENS = ["<|startoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>"];

export async function harmonyModel(): Promise<MakeModelOptions> {
  const added = HARMONY_TOKENS.map((content, i) => ({ id: 151646 + i, content, special: true }));
  const u32 = (v: number) => ({ t: "u32" as const, v });
  const tokenizer = withAddedTokens(await readTokenizer(vocabPath(await llamaSrc(), "qwen2")), added, {
    "tokenizer.ggml.bos_token_id": u32(151646),
    "tokenizer.ggml.eos_token_id": u32(151647),
    "tokenizer.ggml.add_bos_token": { t: "bool", v: false },
  });
  return { preset: "tiny", embeddingLength: 32, heads: 2, kvHeads: 2, feedForwardLength: 64, layers: 1, tokenizer };
}

/* eslint-disable max-len -- a template whose lines are its text: a break would change what it renders */
export const HARMONY_TEMPLATE = `<|start|>system<|message|>You are a helpful assistant.
{{- if and .IsThinkSet .Think (ne .ThinkLevel "") }}

Reasoning: {{ .ThinkLevel }}
{{- else if or (not .IsThinkSet) (and .IsThinkSet .Think) }}

Reasoning: medium
{{- end }}

# Valid channels: analysis, commentary, final.
{{- if .Tools }} Calls to tools go to the commentary channel: 'functions'.{{ end }}<|end|>
{{- if or .System .Tools }}<|start|>developer<|message|>
{{- if .System }}# Instructions

{{ .System }}{{ end }}
{{- if .Tools }}

# Tools

namespace functions {
{{- range .Tools }}
// {{ .Function.Description }}
type {{ .Function.Name }} = (_: {{ json .Function.Parameters }}) => any;
{{- end }}
} // namespace functions
{{- end }}<|end|>
{{- end }}
{{- $open := false }}
{{- range $i, $m := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if eq $m.Role "user" }}<|start|>user<|message|>{{ $m.Content }}<|end|>
{{- else if eq $m.Role "tool" }}<|start|>functions.{{ $m.ToolName }} to=assistant<|message|>{{ $m.Content }}<|end|>
{{- else if eq $m.Role "assistant" }}
{{- if $m.Thinking }}<|start|>assistant<|channel|>analysis<|message|>{{ $m.Thinking }}
{{- if and $last (not $m.Content) (not $m.ToolCalls) }}{{ $open = true }}{{ else }}<|end|>{{ end }}
{{- end }}
{{- if $m.Content }}<|start|>assistant<|channel|>final<|message|>{{ $m.Content }}
{{- if $last }}{{ $open = true }}{{ else }}<|end|>{{ end }}
{{- end }}
{{- range $m.ToolCalls }}<|start|>assistant<|channel|>commentary to=functions.{{ .Function.Name }} <|constrain|>json<|message|>{{ .Function.Arguments }}<|call|>{{ end }}
{{- end }}
{{- end }}
{{- if not $open }}<|start|>assistant{{ end }}`;
/* eslint-enable max-len */
