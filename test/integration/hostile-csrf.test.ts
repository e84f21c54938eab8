/**
 * A web page must not drive the API through the user's browser. Every state-changing
 * endpoint gets the "simple" requests a page can send without a preflight (text/plain bodies) from a
 * foreign origin, from `Origin: null` (sandboxed frames, file pages) and with only the browser's
 * `Sec-Fetch-Site: cross-site`: each is refused with 403 before its body is read, and the store is
 * byte for byte what it was. Requests without Origin (curl, SDKs) are served as before.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import t from "tap";
import { assertError } from "../helpers/assert-error.js";
import { startDaemon } from "../helpers/daemon.js";

/** Every file of the store with its content, to compare before and after. */
async function snapshot(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    out.set(path.relative(root, file), (await readFile(file)).toString("base64"));
  }
  return out;
}

const digest = `sha256:${"0".repeat(64)}`;
const ENDPOINTS: Array<[string, string, Record<string, unknown>]> = [
  ["POST", "/api/create", { model: "tiny", from: "tiny", system: "INJECTED BY A WEB PAGE", stream: false }],
  ["POST", "/api/copy", { source: "tiny", destination: "stolen" }],
  ["DELETE", "/api/delete", { model: "tiny" }],
  ["POST", "/api/pull", { model: "127.0.0.1:9/evil/model", insecure: true, stream: false }],
  ["POST", "/api/push", { model: "tiny", insecure: true, stream: false }],
  ["POST", `/api/blobs/${digest}`, {}],
  ["POST", "/api/generate", { model: "tiny", prompt: "hi", stream: false, keep_alive: "24h" }],
  ["POST", "/api/chat", { model: "tiny", messages: [{ role: "user", content: "hi" }], stream: false }],
  ["POST", "/api/embed", { model: "tiny", input: "hi" }],
  ["POST", "/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }] }],
  ["POST", "/v1/completions", { model: "tiny", prompt: "hi" }],
];

t.test("cross-site simple requests change nothing", async (t) => {
  const { url, app } = await startDaemon(t);
  const root = app.services.store.root;
  const before = await snapshot(root);
  const crossSite: Array<[string, Record<string, string>]> = [
    ["a foreign origin", { origin: "https://evil.example" }],
    ["Origin: null", { origin: "null" }],
    ["Sec-Fetch-Site: cross-site", { "sec-fetch-site": "cross-site" }],
  ];
  for (const [method, route, body] of ENDPOINTS) {
    for (const [what, headers] of crossSite) {
      const res = await fetch(`${url}${route}`, { method, headers: { "content-type": "text/plain", ...headers }, body: JSON.stringify(body) });
      await assertError(t, res, 403, headers.origin ? `origin '${headers.origin}' is not allowed` : "cross-site requests are not allowed");
      t.pass(`${method} ${route} from ${what}: refused`);
    }
  }
  t.same(await snapshot(root), before, "the store is byte for byte unchanged");
  t.same(app.services.scheduler.list(), [], "no model was loaded");
  // The same request without Origin (curl, an SDK) is served.
  const show = await fetch(`${url}/api/show`, { method: "POST", body: JSON.stringify({ model: "tiny" }) });
  t.equal(show.status, 200);
  t.notMatch(((await show.json()) as { system?: string }).system ?? "", /INJECTED/, "the model's system prompt is its own");
  const copy = await fetch(`${url}/api/copy`, { method: "POST", body: JSON.stringify({ source: "tiny", destination: "mine" }) });
  t.equal(copy.status, 200, "without Origin the same copy is served");
});
