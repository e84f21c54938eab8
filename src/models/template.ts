/**
 * A small subset of Go's text/template, enough for Ollama prompt templates written by users
 * (`TEMPLATE` in a Modelfile, `template` in a request): `{{ .System }}`, `{{ .Prompt }}`,
 * `{{ .Response }}`, `{{ if .X }}...{{ else }}...{{ end }}`, and `{{-`/`-}}` whitespace trimming.
 * Models that carry a Jinja chat template in their GGUF are rendered by node-llama-cpp instead.
 */
import { BadRequestError } from "../errors.js";

export interface TemplateValues {
  System?: string | undefined;
  Prompt?: string | undefined;
  Response?: string | undefined;
  Suffix?: string | undefined;
}

type Node = { text: string } | { field: keyof TemplateValues } | { cond: keyof TemplateValues; then: Node[]; else: Node[] };

const FIELDS = new Set(["System", "Prompt", "Response", "Suffix"]);

/** Renders `template`; throws 400 on syntax it does not understand. */
export function renderTemplate(template: string, values: TemplateValues): string {
  return emit(parse(template), values);
}

function emit(nodes: Node[], values: TemplateValues): string {
  let out = "";
  for (const n of nodes) {
    if ("text" in n) out += n.text;
    else if ("field" in n) out += values[n.field] ?? "";
    else out += emit(values[n.cond] ? n.then : n.else, values);
  }
  return out;
}

function parse(template: string): Node[] {
  const tokens = template.split(/(\{\{-?\s*.*?\s*-?\}\})/s);
  // Apply {{- and -}} trimming to neighbouring text first.
  for (let i = 1; i < tokens.length; i += 2) {
    const action = tokens[i] ?? "";
    if (action.startsWith("{{-")) tokens[i - 1] = (tokens[i - 1] ?? "").trimEnd();
    if (action.endsWith("-}}")) tokens[i + 1] = (tokens[i + 1] ?? "").trimStart();
  }
  const root: Node[] = [];
  const stack: { nodes: Node[]; cond?: { cond: keyof TemplateValues; then: Node[]; else: Node[] }; inElse?: boolean }[] = [{ nodes: root }];
  const top = () => stack[stack.length - 1]!;
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i] ?? "";
    if (i % 2 === 0) {
      if (tok) top().nodes.push({ text: tok });
      continue;
    }
    const action = tok.replace(/^\{\{-?\s*|\s*-?\}\}$/g, "");
    let m: RegExpExecArray | null;
    if ((m = /^\.(\w+)$/.exec(action)) && FIELDS.has(m[1] ?? "")) top().nodes.push({ field: m[1] as keyof TemplateValues });
    else if ((m = /^if\s+\.(\w+)$/.exec(action)) && FIELDS.has(m[1] ?? "")) {
      const cond = { cond: m[1] as keyof TemplateValues, then: [] as Node[], else: [] as Node[] };
      top().nodes.push(cond);
      stack.push({ nodes: cond.then, cond });
    } else if (action === "else" && top().cond && !top().inElse) {
      const frame = top();
      frame.nodes = frame.cond!.else;
      frame.inElse = true;
    } else if (action === "end" && stack.length > 1) stack.pop();
    else if (action.startsWith("/*")) continue;
    else throw new BadRequestError(`unsupported template action '{{ ${action.slice(0, 40)} }}'`);
  }
  if (stack.length > 1) throw new BadRequestError("template has an unclosed '{{ if }}'");
  return root;
}
