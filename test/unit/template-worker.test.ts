/**
 * Go templates render in worker threads: a render that runs to its limits holds a worker, never
 * the event loop that answers every other client. Its refusal is the same 400 as in-process.
 */
import t from "tap";
import { parseTemplate, renderInWorker, renderOllama } from "../../src/template/index.js";

/** The longest gap between ticks of a 10 ms timer while `work` runs. */
async function longestStall(work: Promise<unknown>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 10);
  await work.catch(() => undefined);
  clearInterval(timer);
  return longest;
}

t.test("renders as renderOllama does", async (t) => {
  const tmpl = parseTemplate("{{ range .Messages }}[{{ .Role }}] {{ .Content }}\n{{ end }}", "t");
  const messages = [{ role: "system", content: "be brief" }, { role: "user", content: "hi <there>" }];
  t.equal(await renderInWorker(tmpl, { messages }), renderOllama(tmpl, { messages }));
  const legacy = parseTemplate("{{ if .System }}S:{{ .System }} {{ end }}U:{{ .Prompt }} A:{{ .Response }}", "legacy");
  const turns = [...messages, { role: "assistant", content: "hello" }, { role: "user", content: "again" }];
  t.equal(await renderInWorker(legacy, { messages: turns }), renderOllama(legacy, { messages: turns }));
  const raw = parseTemplate("{{ .Prompt }}", "raw", { appendResponse: false });
  t.equal(await renderInWorker(raw, { messages: [{ role: "user", content: "x" }] }), "x", "parsed as it was parsed here (no `.Response` appended)");
});

t.test("a render stopped by its limits is a 400 and stalls nothing here", async (t) => {
  const hostile = parseTemplate("{{ range 1000000000 }}{{ end }}", "h");
  const renders = Array.from({ length: 6 }, () => renderInWorker(hostile, { messages: [] }));
  const stall = await longestStall(Promise.allSettled(renders));
  for (const r of await Promise.allSettled(renders)) {
    t.equal(r.status, "rejected");
    if (r.status === "rejected") {
      t.equal((r.reason as { status?: number }).status, 400);
      t.match((r.reason as Error).message, /template execution exceeded (5000000 steps|1000 ms)/);
    }
  }
  // In-process, six renders of up to a second each held this loop for seconds.
  t.ok(stall < 500, `the event loop kept ticking (longest gap ${stall.toFixed(0)} ms)`);
  t.equal(
    await renderInWorker(parseTemplate("ok {{ .Prompt }}", "ok"), { messages: [{ role: "user", content: "x" }] }),
    "ok x",
    "the workers serve the next render",
  );
});

t.test("a render that builds a huge value is refused and the workers go on", async (t) => {
  const crash = parseTemplate(`{{$a := printf "%1000000s" "x"}}${"{{$a = print $a $a}}".repeat(8)}{{printf "%s" $a}}`, "c");
  await t.rejects(renderInWorker(crash, { messages: [] }), { status: 400, message: /template value exceeded 33554432 characters/ });
  const built = parseTemplate(`{{$a := printf "%1000000s" "x"}}${"{{$a = print $a $a}}".repeat(4)}{{range 8}}{{$b := html $a}}{{end}}`, "b");
  await t.rejects(renderInWorker(built, { messages: [] }), { status: 400, message: /returned more than 67108864 characters in all/ });
  t.equal(await renderInWorker(parseTemplate("{{ .Prompt }}", "p"), { messages: [{ role: "user", content: "y" }] }), "y");
});
