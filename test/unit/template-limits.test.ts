/**
 * Hostile templates: parsing is linear and bounded in size and nesting, and
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

t.test("no ReDoS: '{{' followed by 100000 spaces and no '}}' errors at once", async (t) => {
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
  t.match(
    execError("{{ range $.L }}{{ range $.L }}{{ range $.L }}{{ range $.L }}x{{ end }}{{ end }}{{ end }}{{ end }}", { L: Array(1000).fill(1) }),
    BUDGET,
    "nested ranges over a small list",
  );
  t.match(
    execError(
      '{{ define "a" }}{{ template "b" . }}{{ template "b" . }}{{ template "b" . }}{{ end }}{{ define "b" }}{{ range 1000 }}{{ range 1000 }}{{ end }}{{ end }}{{ end }}{{ template "a" . }}',
    ),
    BUDGET,
  );
  t.match(execError('{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}'), /exceeded maximum template depth \(1000\)/);
  t.match(execError("{{ range 100000 }}{{ $.S }}{{ end }}", { S: "x".repeat(100_000) }), /template output exceeded 33554432 characters/);
  t.match(execError("{{ range 100 }}{{ . }}{{ end }}", {}, { maxSteps: 50 }), /exceeded 50 steps/);
  t.match(execError("{{ range 5000 }}{{ . }}{{ end }}", {}, { timeoutMs: -1 }), /template execution exceeded -1 ms/, "the deadline is checked as it runs");
  t.equal(execError("{{ range 100 }}{{ . }}{{ end }}", {}, { maxSteps: 1000 }), "no error");
  t.match(
    execError("{{ range 1000000 }}{{ $x := json $.Big }}{{ end }}", { Big: Array.from({ length: 20_000 }, (_, i) => ({ k: "v".repeat(40), i })) }),
    /template execution exceeded 1000 ms/,
    "expensive steps meet the deadline",
  );
});

t.test("random token soup: every template parses or is a 400, every execution returns or is a 400", async (t) => {
  const fc = (await import("fast-check")).default;
  const tokens = [
    "{{", "}}", "{{-", "-}}", " ", "\n", ".", ".A", ".B", "$", "$x", ":=", "=", "|", "(", ")", "if", "else", "end", "range", "with", "define", "template",
    "block", "break", "continue", '"T"', "`r`", "'c'", "1", "-2", "1.5", "0x1f", "nil", "true", "len", "index", "slice", "printf", '"%d %s %v"', "eq", "lt",
    "and", "or", "not", "json", "print", "html", "/*", "*/", ",", "$i", "$v", "x", "{", "}", "-", "call",
  ];
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

/*
 * What a render builds is bounded, not only how many steps it takes: joining strings is nearly
 * free (`print $a $a` is one step whatever $a's length), so a few steps could build a value of
 * hundreds of millions of characters, which the next function then walked (or spread into an
 * array) in one step the clock never saw.
 */
const DOUBLE = "{{$a = print $a $a}}";

t.test("every value a function returns is held to a length, checked as it grows", async (t) => {
  t.match(
    execError(`{{$a := printf "%600s" "x"}}${DOUBLE}`, {}, { maxValue: 1000 }),
    /^template: t:1:\d+: executing "t" at <print>: template value exceeded 1000 characters$/,
  );
  t.equal(execError(`{{$a := printf "%500s" "x"}}${DOUBLE}{{len $a}}`, {}, { maxValue: 1000 }), "no error", "a value at the limit is fine");
  for (const [fn, src] of [
    ["printf", '{{printf "%s%s" $.S $.S}}'],
    ["html", "{{html $.S}}"],
    ["js", "{{js $.S}}"],
    ["urlquery", "{{urlquery $.S}}"],
    ["json", "{{json $.S}}"],
    ["printf %q", '{{printf "%q" $.S}}'],
    ["printf %x", '{{printf "%x" $.S}}'],
    ["println", "{{println $.S $.S}}"],
  ] as const) {
    // 600 characters, each escape of which is longer than 1000.
    t.match(
      execError(src, { S: "<\u0001 \u2028".repeat(150) }, { maxValue: 1000 }),
      /template value exceeded 1000 characters/,
      `${fn} of a value that grows past the limit`,
    );
  }
  t.match(
    execError('{{printf "%s%s%s%s" $.S $.S $.S $.S}}', { S: "<".repeat(100_000) }, { maxValue: 150_000 }),
    /template value exceeded 150000 characters/,
    "printf stops at the limit, not at the end",
  );
});

t.test("the values returned in all are held to a total", async (t) => {
  t.match(
    execError("{{range 20}}{{$x := print $.S}}{{end}}", { S: "x".repeat(100) }, { maxBuilt: 1000 }),
    /template functions returned more than 1000 characters in all/,
  );
  t.equal(execError("{{range 9}}{{$x := print $.S}}{{end}}", { S: "x".repeat(100) }, { maxBuilt: 1000 }), "no error");
});

t.test("the crash template of a few hundred bytes is refused at once, building nothing", async (t) => {
  // Eight doublings of a million characters: 256 Mi characters, which padding must not spread into an array.
  const src = `{{$a := printf "%1000000s" "x"}}${DOUBLE.repeat(8)}{{printf "%s" $a}}`;
  const t0 = performance.now();
  t.match(execError(src), /at <print>: template value exceeded 33554432 characters/);
  t.ok(performance.now() - t0 < 30_000, "and returns");
});

t.test("widths and precisions count characters without building arrays", async (t) => {
  // Each printf walked (and spread) all eight million characters to pad or cut five: seconds per call.
  const S = "é".repeat(8 * 1024 * 1024);
  t.equal(execError('{{range 30}}{{printf "%5.2s|" $.S}}{{end}}', { S }, { timeoutMs: 1000 }), "no error");
  const out = parseTemplate('{{printf "%-4.2s|%4s|%.1s|%3s" .A .B .C .D}}', "t", { appendResponse: false }).execute({
    A: "😀😀😀",
    B: "😀",
    C: "\ud83dx",
    D: "😀😀😀😀",
  });
  t.equal(out, "😀😀  |   😀|\ud83d|😀😀😀😀", "code points, as Go counts runes");
});

t.test("long operations read the clock as they go", async (t) => {
  // One step: html over twenty million characters. Without a look at the clock inside, it ran to the end.
  t.match(execError("{{$x := html $.S}}", { S: "<".repeat(20_000_000) }, { timeoutMs: 10 }), /template execution exceeded 10 ms/);
  t.match(
    execError("{{$x := printf $.F}}", { F: "%c".repeat(4_000_000) }, { timeoutMs: 10 }),
    /template execution exceeded 10 ms/,
    "four million directives in one printf",
  );
});

t.test("escapes done a chunk at a time equal escapes done whole", async (t) => {
  // Many chunks of 64 Ki units, the first boundary falling inside a surrogate pair.
  const unit = "a<b>&c\"d'e\\f\u0000g\u0007h\u2028i😀j\u0085k=l m\u00a0n\ud800o\udc00p";
  const n = Math.ceil(200_000 / unit.length);
  const S = findLead(unit, n);
  t.ok(S.charCodeAt(65535) >= 0xd800 && S.charCodeAt(65535) <= 0xdbff, "a pair straddles the first chunk boundary");
  const pre = S.slice(0, S.length - unit.length * n);
  const run = (src: string): string => parseTemplate(src, "t", { appendResponse: false }).execute({ S });
  const small = (src: string): string => parseTemplate(src, "t", { appendResponse: false }).execute({ S: unit });
  for (const fn of ["html", "js", "urlquery"]) t.equal(run(`{{${fn} .S}}`), pre + small(`{{${fn} .S}}`).repeat(n), fn);
  t.equal(run("{{json .S}}"), `"${pre}${small("{{json .S}}").slice(1, -1).repeat(n)}"`, "json");
  t.equal(run('{{printf "%q" .S}}'), `"${pre}${small('{{printf "%q" .S}}').slice(1, -1).repeat(n)}"`, "%q");
});

/** `x`s then `unit` n times, with as many `x`s as put a surrogate pair across index 65535/65536. */
function findLead(unit: string, n: number): string {
  for (let k = 0; k < unit.length; k++) {
    const s = "x".repeat(k) + unit.repeat(n);
    const c = s.charCodeAt(65535);
    if (c >= 0xd800 && c <= 0xdbff && s.charCodeAt(65536) >= 0xdc00) return s;
  }
  throw new Error("no lead found");
}

t.test("a legacy template's turns share one budget", async (t) => {
  const { renderOllama } = await import("../../src/template/index.js");
  const tmpl = parseTemplate("{{ .System }}{{ .Prompt }}{{ .Response }}", "t");
  const messages = Array.from({ length: 6 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: "x".repeat(400) }));
  t.equal(renderOllama(tmpl, { messages }, { maxOutput: 5000 }).length, 2400, "each turn and all of them fit");
  t.throws(() => renderOllama(tmpl, { messages }, { maxOutput: 2000 }), /template output exceeded 2000 characters/, "each turn fits, all of them do not");
});
