/**
 * The functions templates call: Go's built-ins (text/template/funcs.go), the fmt verbs printf
 * reaches, and Ollama's json / currentDate / yesterdayDate / toTypeScriptType.
 */
import t from "tap";
import { parseTemplate } from "../../src/template/index.js";

const run = (src: string, data: unknown = {}): string => parseTemplate(src, "t", { appendResponse: false }).execute(data);
const execError = (src: string, data: unknown = {}): string => {
  try {
    run(src, data);
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
};

t.test("and, or, not: values, not booleans, and short-circuit", async (t) => {
  t.equal(run("{{ and 1 0 2 }}|{{ and 1 2 }}|{{ or 0 \"\" }}|{{ or 0 \"x\" 1 }}"), "0|2||x");
  t.equal(run("{{ and 0 (index .L 5) }}|{{ or 1 (index .L 5) }}", { L: [] }), "0|1", "the deciding argument stops evaluation");
  t.equal(run("{{ not 0 }} {{ not \"x\" }} {{ not .Missing }}"), "true false true");
  t.equal(run("{{ 1 | and 1 }}|{{ 0 | or 0 }}"), "1|0", "the piped value is the last argument");
  t.match(execError("{{ and }}"), /wrong number of args for and: want at least 1 got 0/);
});

t.test("comparisons: eq with several operands, ordered kinds, incompatible types", async (t) => {
  t.equal(run('{{ eq 1 1 }} {{ eq "a" "b" "a" }} {{ eq .S "x" }} {{ ne 1 2 }} {{ eq true true }}', { S: "x" }), "true true true true true");
  t.equal(run("{{ lt 1 2 }} {{ le 2 2 }} {{ gt 3 2 }} {{ ge 1 2 }} {{ lt \"a\" \"b\" }} {{ lt 1.5 2.5 }}"), "true true true false true true");
  t.equal(run("{{ eq .Missing 1 }}"), "false", "nil compares unequal without error");
  t.match(execError('{{ eq 1 "a" }}'), /error calling eq: incompatible types for comparison/);
  t.match(execError("{{ lt 1 1.5 }}"), /incompatible types for comparison/, "int and float64 do not mix");
  t.match(execError("{{ lt true false }}"), /invalid type for comparison/);
  t.match(execError("{{ eq 1 }}"), /missing argument for comparison/);
  t.equal(run("{{ eq (len .L) 2 }}", { L: [1, 2] }), "true", "len is an int, as the constant");
  t.equal(run("{{ eq .F 2.0 }}", { F: 2 }), "true", "JSON numbers are float64");
});

t.test("len, index, slice", async (t) => {
  t.equal(run('{{ len "héllo" }} {{ len .L }} {{ len .M }}', { L: [1, 2, 3], M: { a: 1 } }), "6 3 1", "len of a string counts bytes");
  t.match(execError("{{ len 3 }}"), /error calling len: len of type int/);
  t.equal(
    run('{{ index .L 1 }} {{ index .N 1 0 }} {{ index .M "a" }} {{ index .M "zz" }} {{ index "abc" 1 }}', { L: ["x", "y"], N: [[1], ["z"]], M: { a: "A" } }),
    "y z A <no value> 98",
  );
  t.match(execError("{{ index .L 2 }}", { L: ["x", "y"] }), /index out of range: 2/);
  t.match(execError("{{ index .L \"a\" }}", { L: [] }), /cannot index slice\/array with type string/);
  t.match(execError("{{ index .M 1 }}", { M: {} }), /value has type int; should be string/);
  t.match(execError("{{ index nil 1 }}"), /index of untyped nil/);
  t.equal(run('{{ slice "hello" 1 3 }} {{ slice .L 1 }} {{ slice .L 0 1 }} {{ slice .L }}', { L: ["a", "b", "c"] }), "el [b c] [a] [a b c]");
  t.match(execError("{{ slice .L 2 1 }}", { L: [1, 2, 3] }), /invalid slice index: 2 > 1/);
  t.match(execError('{{ slice "abc" 0 1 2 }}'), /cannot 3-index slice a string/);
});

t.test("print, println, printf and fmt's verbs", async (t) => {
  t.equal(run('{{ print 1 2 "a" 3 "b" "c" }}'), "1 2a3bc", "Sprint: spaces only between non-strings");
  t.equal(run('{{ println 1 "a" }}'), "1 a\n");
  t.equal(run('{{ printf "%s|%v|%d|%q|%t" "s" .L 42 "q\\n" true }}', { L: [1, "x"] }), 's|[1 x]|42|"q\\n"|true');
  t.equal(
    run('{{ printf "[%5d][%-5d][%05d][%+d][%x][%X][%o][%b][%c][%U]" 42 42 42 42 255 255 8 5 65 65 }}'),
    "[   42][42   ][00042][+42][ff][FF][10][101][A][U+0041]",
  );
  t.equal(run('{{ printf "[%6.2f][%.3e][%g][%g][%v][%.1f]" 3.14159 1234.56 0.00001 100000.0 2.5 2.0 }}'), "[  3.14][1.235e+03][1e-05][100000][2.5][2.0]");
  t.equal(
    run('{{ printf "%.0f %.0f %.0f %.1f %.3e %.2g" 2.5 3.5 -2.5 0.25 1234.5 2.25 }}'),
    "2 4 -2 0.2 1.234e+03 2.2",
    "exact ties round to even, as strconv does",
  );
  t.equal(run('{{ printf "[%8s][%-8s][%.2s][%x]" "ab" "ab" "abc" "hi" }}'), "[      ab][ab      ][ab][6869]");
  t.equal(run('{{ printf "%d %s" "x" 1 }}'), "%!d(string=x) %!s(int=1)");
  t.equal(run('{{ printf "%d %d" 1 }}'), "1 %!d(MISSING)");
  t.equal(run('{{ printf "%d" 1 2 }}'), "1%!(EXTRA int=2)");
  t.equal(run('{{ printf "100%%" }}'), "100%");
  t.equal(run('{{ printf "%v %s" .M .Missing }}', { M: { b: 1, a: "x" } }), "map[a:x b:1] %!s(<nil>)");
  t.equal(run('{{ printf "%T %T %T %T" 1 1.5 "s" true }}'), "int float64 string bool");
  t.equal(run('{{ printf "%99999999d" 1 }}'), "%!(BADWIDTH)1", "widths over a million are refused, as fmt does");
});

t.test("html, js, urlquery", async (t) => {
  t.equal(run(`{{ html "<a href=\\"x\\">'&'</a>" }}`), "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  t.equal(run(`{{ js "a'b\\"c<d>=&\\\\" }}`), "a\\'b\\\"c\\u003Cd\\u003E\\u003D\\u0026\\\\");
  t.equal(run('{{ urlquery "a b&c=d/é" }}'), "a+b%26c%3Dd%2F%C3%A9");
  t.equal(run("{{ html 1 2 }}"), "1 2", "several arguments are fmt.Sprint'ed");
});

t.test("Ollama's json: Go's json.Marshal (sorted keys, HTML-safe, compact)", async (t) => {
  t.equal(
    run("{{ json .V }}", { V: { b: [1, 2.5, null, true], a: "<&>", c: { z: 1e21, y: 1e-7, x: 100 } } }),
    '{"a":"\\u003c\\u0026\\u003e","b":[1,2.5,null,true],"c":{"x":100,"y":1e-7,"z":1e+21}}',
  );
  t.equal(run('{{ json "line\\n\\u2028" }}'), '"line\\n\\u2028"');
  t.equal(run("{{ json .Missing }} {{ json 3 }} {{ json 1.5 }}"), "null 3 1.5");
});

t.test("Ollama's currentDate and yesterdayDate: YYYY-MM-DD in local time", async (t) => {
  const pad = (n: number) => String(n).padStart(2, "0");
  const fmt = (d: Date) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const before = fmt(new Date());
  const got = run('{{ currentDate }} {{ currentDate "ignored format" }}').split(" ");
  const after = fmt(new Date());
  t.ok(got[0] === before || got[0] === after, `${got[0]}`);
  t.equal(got[0], got[1], "the format argument is accepted and ignored");
  const y = new Date();
  y.setDate(y.getDate() - 1);
  t.match(run("{{ yesterdayDate }}"), /^\d{4}-\d{2}-\d{2}$/);
  t.ok([fmt(y), (() => { const z = new Date(); z.setDate(z.getDate() - 1); return fmt(z); })()].includes(run("{{ yesterdayDate }}")));
  t.match(execError("{{ currentDate 1 }}"), /wrong type for value; expected string; got int/);
});

t.test("Ollama's toTypeScriptType: any for anything that is not an api.ToolProperty", async (t) => {
  t.equal(run("{{ toTypeScriptType .V }}", { V: { type: "string" } }), "any", "a plain map is not a ToolProperty");
});
