/**
 * Hostile templates (issue 13 item 1): parsing is linear and bounded in size and nesting, and
 * execution is bounded in steps, output, call depth and time — each ends in a clean 400, never a
 * frozen event loop or a crashed stack. (No wall-time assertions here: the HTTP test checks that
 * the daemon stays responsive.)
 */
import t from "tap";
import { parseTemplate } from "../../src/template/index.js";

const parseError = (src: string): string => {
  try {
    parseTemplate(src, "t");
  } catch (e) {
    t.equal((e as { status?: number }).status, 400, "a 400, not a crash");
    return (e as Error).message;
  }
  return "no error";
};
const execError = (src: string, data: unknown = {}, limits = {}): string => {
  try {
    parseTemplate(src, "t", { appendResponse: false }).execute(data, limits);
  } catch (e) {
    t.equal((e as { status?: number }).status, 400, "a 400, not a crash");
    return (e as Error).message;
  }
  return "no error";
};

t.test("the ReDoS of issue 13: '{{' followed by 100000 spaces and no '}}' errors at once", async (t) => {
  t.equal(parseError("{{" + " ".repeat(100_000)), "template: t:1: unclosed action");
  t.equal(parseError("{{-" + " ".repeat(100_000)), "template: t:1: unclosed action");
  t.equal(parseError("x {{" + " \n\t".repeat(100_000)), "template: t:100001: unclosed action started at t:1");
  t.equal(parseError("{{ .Prompt " + " ".repeat(100_000) + " -}"), 'template: t:1: illegal number syntax: "-"');
});

t.test("other hostile inputs parse in one pass and fail cleanly", async (t) => {
  t.match(parseError("{{".repeat(100_000)), /unexpected "\{" in command/);
  t.match(parseError("{{/*" + " ".repeat(500_000)), /unclosed comment/);
  t.match(parseError('{{ "' + "\\\\".repeat(300_000)), /unterminated quoted string/);
  t.match(parseError("{{ `" + "a".repeat(500_000)), /unterminated raw quoted string/);
  t.match(parseError("}}".repeat(100_000) + "{{"), /unclosed action/);
  t.match(parseError("{{ .A" + "|.A".repeat(100_000)), /unclosed action/);
  t.equal(parseTemplate("{{ .X" + ".a".repeat(100_000) + " }}").vars().has("x"), true, "a long field chain is fine");
});

t.test("size and nesting are bounded", async (t) => {
  t.equal(parseError("x".repeat(1024 * 1024 + 1)), "template: t: template is larger than 1048576 bytes");
  t.match(parseError("{{" + "(".repeat(100_000)), /template nested too deeply \(more than 500 levels\)/);
  t.match(parseError("{{ if 1 }}".repeat(100_000)), /template nested too deeply/);
  t.match(parseError("{{ if 1 }}" + "{{ else if 1 }}".repeat(10_000) + "{{ end }}"), /template nested too deeply/);
  t.equal(parseTemplate("{{ if 1 }}".repeat(400) + "x" + "{{ end }}".repeat(400), "t", { appendResponse: false }).execute({}), "x", "400 levels are fine");
});

// Whichever comes first on a busy machine: 5M steps or the 1 s deadline.
const BUDGET = /template execution exceeded (5000000 steps|1000 ms)/;

t.test("execution is bounded: steps, output, template depth, time", async (t) => {
  t.match(execError("{{ range 1000000000 }}{{ end }}"), BUDGET, "a billion iterations");
  t.match(execError("{{ range $.L }}{{ range $.L }}{{ range $.L }}{{ range $.L }}x{{ end }}{{ end }}{{ end }}{{ end }}", { L: Array(1000).fill(1) }), BUDGET, "nested ranges over a small list");
  t.match(execError('{{ define "a" }}{{ template "b" . }}{{ template "b" . }}{{ template "b" . }}{{ end }}{{ define "b" }}{{ range 1000 }}{{ range 1000 }}{{ end }}{{ end }}{{ end }}{{ template "a" . }}'), BUDGET);
  t.match(execError('{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}'), /exceeded maximum template depth \(1000\)/);
  t.match(execError("{{ range 100000 }}{{ $.S }}{{ end }}", { S: "x".repeat(100_000) }), /template output exceeded 33554432 characters/);
  t.match(execError("{{ range 100 }}{{ . }}{{ end }}", {}, { maxSteps: 50 }), /exceeded 50 steps/);
  t.match(execError("{{ range 5000 }}{{ . }}{{ end }}", {}, { timeoutMs: -1 }), /template execution exceeded -1 ms/, "the deadline is checked as it runs");
  t.equal(execError("{{ range 100 }}{{ . }}{{ end }}", {}, { maxSteps: 1000 }), "no error");
  t.match(execError("{{ range 1000000 }}{{ $x := json $.Big }}{{ end }}", { Big: Array.from({ length: 20_000 }, (_, i) => ({ k: "v".repeat(40), i })) }), /template execution exceeded 1000 ms/, "expensive steps meet the deadline");
});

t.test("random token soup: every template parses or is a 400, every execution returns or is a 400", async (t) => {
  const fc = (await import("fast-check")).default;
  const tokens = ["{{", "}}", "{{-", "-}}", " ", "\n", ".", ".A", ".B", "$", "$x", ":=", "=", "|", "(", ")", "if", "else", "end", "range", "with", "define", "template", "block", "break", "continue", '"T"', "`r`", "'c'", "1", "-2", "1.5", "0x1f", "nil", "true", "len", "index", "slice", "printf", '"%d %s %v"', "eq", "lt", "and", "or", "not", "json", "print", "html", "/*", "*/", ",", "$i", "$v", "x", "{", "}", "-", "call"];
  let executed = 0;
  fc.assert(
    fc.property(fc.array(fc.constantFrom(...tokens), { maxLength: 40 }), (parts) => {
      const src = parts.map((p, i) => (i % 3 === 0 ? `{{${p}` : `${p} `)).join("") + "}}";
      let tmpl;
      try {
        tmpl = parseTemplate(src, "f", { appendResponse: false });
      } catch (e) {
        return (e as { status?: number }).status === 400;
      }
      try {
        tmpl.execute({ A: [1, "a", { B: 2 }], B: { k: "v" } }, { maxSteps: 10_000 });
        executed++;
        return true;
      } catch (e) {
        return (e as { status?: number }).status === 400;
      }
    }),
    { numRuns: 5000, seed: 12 },
  );
  t.ok(executed > 100, `${executed} random templates executed`);
});
