/**
 * Log records as journal entries (src/journal.ts): the native protocol's bytes, field names,
 * priorities and the readable MESSAGE. The entries reaching a real journald are checked under
 * systemd by test/packaging/install-test.sh.
 */
import t from "tap";
import { journalEntry } from "../../src/journal.js";

/** Decodes the native protocol: `KEY=value\n`, or `KEY\n` + 64-bit LE length + bytes + `\n`. */
function decode(buf: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < buf.length) {
    const nl = buf.indexOf(10, i);
    const line = buf.toString("utf8", i, nl);
    const eq = line.indexOf("=");
    if (eq >= 0) {
      out[line.slice(0, eq)] = line.slice(eq + 1);
      i = nl + 1;
    } else {
      const size = Number(buf.readBigUInt64LE(nl + 1));
      out[line] = buf.toString("utf8", nl + 9, nl + 9 + size);
      t.equal(buf[nl + 9 + size], 10, `${line}: a newline after the value`);
      i = nl + 10 + size;
    }
  }
  return out;
}

t.test("a request record: priority, a readable message, LMD_ fields", async (t) => {
  const e = decode(
    journalEntry({
      level: 30,
      time: "x",
      pid: 1,
      reqId: "abc",
      method: "POST",
      path: "/api/generate",
      status: 200,
      durationMs: 12.5,
      model: "demo",
      msg: "request",
    }),
  );
  t.same(e, {
    MESSAGE: "request: POST /api/generate 200 in 12.5 ms (model demo)",
    PRIORITY: "6",
    SYSLOG_IDENTIFIER: "lmd",
    LMD_REQUEST_ID: "abc",
    LMD_METHOD: "POST",
    LMD_PATH: "/api/generate",
    LMD_STATUS: "200",
    LMD_DURATION_MS: "12.5",
    LMD_MODEL: "demo",
  });
});

t.test("a failure: priority 3, its message, stack and first frame", async (t) => {
  const stack =
    "ModelLoadError: failed to load model 'x'\n    at Scheduler.load (file:///usr/lib/lmd/dist/src/scheduler/scheduler.js:120:15)\n    at next (node:internal/x:1:1)";
  const e = decode(
    journalEntry({
      level: 50,
      reqId: "r1",
      method: "POST",
      path: "/api/chat",
      status: 500,
      durationMs: 3,
      msg: "request failed",
      err: { type: "ModelLoadError", message: "failed to load model 'x'", stack },
    }),
  );
  t.equal(e.PRIORITY, "3");
  t.equal(e.MESSAGE, "request failed: POST /api/chat 500 in 3 ms: failed to load model 'x'");
  t.equal(e.LMD_ERROR, "failed to load model 'x'");
  t.equal(e.LMD_ERROR_STACK, stack, "a multi-line value in the length-prefixed form");
  t.same([e.CODE_FILE, e.CODE_LINE, e.CODE_FUNC], ["/usr/lib/lmd/dist/src/scheduler/scheduler.js", "120", "Scheduler.load"]);
});

t.test("levels, objects, string errors, newlines in messages", async (t) => {
  const p = (level: number) => decode(journalEntry({ level, msg: "m" })).PRIORITY;
  t.same([p(60), p(50), p(40), p(30), p(20), p(10)], ["2", "3", "4", "6", "7", "7"]);
  const e = decode(
    journalEntry({ level: 50, msg: "policy file not reloaded", err: "bad.yaml: /models must be object", models: ["a", "b"], threadpool: "persistent" }),
  );
  t.equal(e.MESSAGE, "policy file not reloaded (bad.yaml: /models must be object)");
  t.equal(e.LMD_ERR, "bad.yaml: /models must be object");
  t.equal(e.LMD_MODELS, '["a","b"]', "objects as JSON");
  t.equal(e.LMD_THREADPOOL, "persistent");
  t.equal(decode(journalEntry({ level: 30, msg: "two\nlines" })).MESSAGE, "two\nlines");
});
