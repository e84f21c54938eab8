/**
 * Go's text/template language, construct by construct. Expected outputs are what Go's text/template
 * prints (its package documentation and exec_test.go cases); data maps stand for Go's map[string]any.
 */
import t from "tap";
import { parseTemplate } from "../../src/template/index.js";

/** Parses as plain Go does (no Ollama `.Response` appended) and executes. */
const run = (src: string, data: unknown = {}): string => parseTemplate(src, "t", { appendResponse: false }).execute(data);
const parseError = (src: string): string => {
  try {
    parseTemplate(src, "t", { appendResponse: false });
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
};
const execError = (src: string, data: unknown = {}): string => {
  try {
    run(src, data);
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
};

t.test("text, trim markers and comments", async (t) => {
  t.equal(run("{{23 -}} < {{- 45}}"), "23<45", "the package documentation's example");
  t.equal(run("a \n\t{{- 1 -}}\n\t b"), "a1b");
  t.equal(run("{{-3}}"), "-3", "no space after the minus: a negative number, not a trim marker");
  t.equal(run("a{{/* a comment */}}b"), "ab");
  t.equal(run("a {{- /* a comment */ -}} b"), "ab");
  t.equal(run("a{{/* multi\nline */}}b"), "ab");
  t.equal(run("no actions at all }} {"), "no actions at all }} {");
});

t.test("literals", async (t) => {
  t.equal(run('{{ "a\\tb\\u00e9\\x41" }}'), "a\tbéA");
  t.equal(run("{{ `raw\\n\nline` }}"), "raw\\n\nline");
  t.equal(run("{{ 'a' }} {{ '\\n' }} {{ printf \"%c\" 'é' }}"), "97 10 é", "character constants are ints");
  t.equal(run("{{ 42 }} {{ -7 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }}"), "42 -7 31 15 5 1000");
  t.equal(run("{{ 1.5 }} {{ 1e3 }} {{ 1e6 }} {{ 0.000001 }} {{ 123456789.0 }} {{ 1.0 }}"), "1.5 1000 1e+06 1e-06 1.23456789e+08 1");
  t.equal(run("{{ true }} {{ false }}"), "true false");
  t.match(execError("{{ nil }}"), /nil is not a command/);
  t.match(parseError("{{ 9223372036854775808 }}"), /integer overflow/);
  t.match(parseError("{{ 1x }}"), /bad number syntax/);
  t.match(parseError('{{ "unterminated }}'), /unterminated quoted string/);
});

t.test("fields, maps and missing keys (missingkey=zero)", async (t) => {
  const data = { A: { B: { C: "deep" } }, M: { k: "v" }, Empty: null };
  t.equal(run("{{ .A.B.C }} {{ $.A.B.C }} {{ .M.k }}", data), "deep deep v");
  t.equal(run("{{ .Missing }}", data), "<no value>", "a missing key of map[string]any prints <no value>");
  t.equal(run("{{ .Empty }}", data), "<no value>");
  t.match(execError("{{ .Missing.Deeper }}", data), /nil pointer evaluating interface \{\}\.Deeper/);
  t.equal(run("{{ $x := .Missing }}{{ $x.Deeper }}", data), "<no value>", "an invalid value (not a nil interface) yields zero");
  t.match(execError('{{ .M.k.x }}', data), /can't evaluate field x in type string/);
  t.equal(run("{{ (index .A \"B\").C }}", data), "deep", "a field of a parenthesised pipeline (chain)");
  t.equal(run("{{ . }}", { b: 2, a: [1, "x"], c: { d: true } }), "map[a:[1 x] b:2 c:map[d:true]]", "maps print with sorted keys");
});

t.test("pipelines and parentheses", async (t) => {
  t.equal(run('{{ "x" | printf "%s-%s" "a" }}'), "a-x", "the previous value is the last argument");
  t.equal(run('{{ "abc" | len | printf "%d!" }}'), "3!");
  t.equal(run('{{ printf "%d" (len .L) }}', { L: [1, 2, 3] }), "3");
  t.match(parseError("{{ 1 | 2 }}"), /non executable command in pipeline stage 2/);
  t.match(execError('{{ "x" | "y" }}'), /./);
  t.match(execError("{{ 1 2 }}"), /can't give argument to non-function 1/);
});

t.test("variables: declare, assign, scope, $", async (t) => {
  t.equal(run('{{ $x := "a" }}{{ $x }}{{ $x = "b" }}{{ $x }}'), "ab");
  t.equal(run("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}"), "2", "assignment reaches the outer variable");
  t.match(parseError("{{ if true }}{{ $y := 1 }}{{ end }}{{ $y }}"), /undefined variable "\$y"/, "a declaration ends with its block");
  t.equal(run("{{ with .A }}{{ $.B }}{{ . }}{{ end }}", { A: "a", B: "b" }), "ba", "$ is the data passed to Execute");
  t.equal(run("{{ $x := 1 }}{{ $x }}"), "1", "a declaration prints nothing");
});

t.test("if / else if / else and Go's truth", async (t) => {
  const truth = (v: unknown) => run("{{ if .V }}T{{ else }}F{{ end }}", { V: v });
  t.same([false, 0, 0n, "", [], {}, null, undefined].map(truth), ["F", "F", "F", "F", "F", "F", "F", "F"]);
  t.same([true, 1, -1n, "0", [0], { a: 1 }, 0.5].map(truth), ["T", "T", "T", "T", "T", "T", "T"]);
  const chain = "{{ if eq .N 1 }}one{{ else if eq .N 2 }}two{{ else }}many{{ end }}";
  t.same([1n, 2n, 3n].map((N) => run(chain, { N })), ["one", "two", "many"]);
  t.match(parseError("{{ if 1 }}{{ else }}{{ else }}{{ end }}"), /expected end; found \{\{else\}\}/);
  t.match(parseError("{{ if }}{{ end }}"), /missing value for if/);
});

t.test("range: slices, maps in key order, integers, else, break, continue", async (t) => {
  t.equal(run("{{ range .L }}[{{ . }}]{{ end }}", { L: ["a", "b"] }), "[a][b]");
  t.equal(run("{{ range $i, $v := .L }}{{ $i }}={{ $v }} {{ end }}", { L: ["a", "b"] }), "0=a 1=b ");
  t.equal(run("{{ range $v := .L }}{{ $v }}{{ end }}", { L: ["a", "b"] }), "ab", "one variable is the element");
  t.equal(run("{{ range $k, $v := .M }}{{ $k }}:{{ $v }} {{ end }}", { M: { b: 2, a: 1, C: 3 } }), "C:3 a:1 b:2 ", "byte order of keys");
  t.equal(run("{{ range .L }}x{{ else }}empty{{ end }}", { L: [] }), "empty");
  t.equal(run("{{ range .Missing }}x{{ else }}empty{{ end }}"), "empty", "nil ranges as empty");
  t.equal(run("{{ range 3 }}{{ . }}{{ end }}"), "012", "range over an int (Go 1.22)");
  t.match(execError("{{ range $i, $v := 3 }}{{ end }}"), /can't use 3 to iterate over more than one variable/);
  t.equal(run("{{ range .L }}{{ if eq . 3 }}{{ break }}{{ end }}{{ . }}{{ end }}", { L: [1n, 2n, 3n, 4n] }), "12");
  t.equal(run("{{ range .L }}{{ if eq . 2 }}{{ continue }}{{ end }}{{ . }}{{ end }}", { L: [1n, 2n, 3n] }), "13");
  t.match(parseError("{{ break }}"), /\{\{break\}\} outside \{\{range\}\}/);
  t.match(execError("{{ range .S }}{{ end }}", { S: "abc" }), /range can't iterate over abc/);
  t.equal(run("{{ range $i, $e := .L }}{{ $i }}{{ end }}{{ $x := 5 }}{{ range .L }}{{ $x = . }}{{ end }}{{ $x }}", { L: [7n, 8n] }), "018");
});

t.test("with / else with", async (t) => {
  t.equal(run("{{ with .A }}{{ . }}{{ else }}none{{ end }}", { A: "x" }), "x");
  t.equal(run("{{ with .A }}{{ . }}{{ else }}none{{ end }}", { A: "" }), "none");
  t.equal(run("{{ with .A }}a{{ else with .B }}b{{ . }}{{ else }}c{{ end }}", { A: 0, B: "!" }), "b!");
  t.equal(run("{{ with $x := .A }}{{ $x }}{{ end }}", { A: "v" }), "v");
});

t.test("define, template and block", async (t) => {
  t.equal(run('{{ define "T" }}<{{ . }}>{{ end }}{{ template "T" "a" }}{{ template "T" .X }}', { X: 1n }), "<a><1>");
  t.equal(run('{{ block "B" .X }}[{{ . }}]{{ end }}', { X: "x" }), "[x]", "block defines and runs in place");
  t.equal(run('{{ define "T" }}{{ $ }}{{ end }}{{ $v := 1 }}{{ template "T" 2 }}'), "2", "no dynamic scoping: $ is the template's dot");
  t.match(execError('{{ template "nope" . }}'), /template "nope" not defined/);
  t.match(parseError('{{ define "T" }}a{{ end }}{{ define "T" }}b{{ end }}'), /multiple definition of template "T"/);
  t.match(parseError('{{ template "T" }}'), /undefined template specified/, "Ollama's Parse refuses a template call without a pipeline");
  t.match(execError('{{ define "R" }}{{ template "R" . }}{{ end }}{{ template "R" . }}'), /exceeded maximum template depth/);
});

t.test("parse errors name the template and line as Go does", async (t) => {
  t.equal(parseError("{{ .X "), "template: t:1: unclosed action");
  t.equal(parseError("a\nb\n{{ end }}"), "template: t:3: unexpected {{end}}");
  t.equal(parseError("{{ if .X }}\n"), "template: t:2: unexpected EOF");
  t.equal(parseError("{{ foo }}"), 'template: t:1: function "foo" not defined');
  t.equal(parseError("{{ .X\n\n"), "template: t:3: unclosed action started at t:1");
  t.equal(parseError("{{ $x }}"), 'template: t:1: undefined variable "$x"');
  t.equal(parseError("{{ # }}"), 'template: t:1: unexpected "#" in command');
  t.equal(parseError("{{ .X ) }}"), 'template: t:1: unexpected ")" in command');
  t.equal(parseError("{{ (.X }}"), "template: t:1: unclosed left paren");
  t.equal(parseError("{{/* x */ y }}"), "template: t:1: comment ends before closing delimiter");
  t.throws(() => parseTemplate("{{ .X "), { name: "BadRequestError", status: 400 });
});

t.test("execution errors name the position and the node", async (t) => {
  t.equal(execError("{{ index .L 5 }}", { L: [] }), 'template: t:1:3: executing "t" at <index>: error calling index: index out of range: 5');
  t.equal(execError("x\n  {{ .S.F }}", { S: "s" }), 'template: t:2:7: executing "t" at <.S.F>: can\'t evaluate field F in type string');
  t.throws(() => run("{{ index .L 5 }}", { L: [] }), { name: "BadRequestError", status: 400 });
});
