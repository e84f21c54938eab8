/**
 * A keep_alive too long for a Date or a timer is "forever" (as Ollama treats
 * huge durations), reported consistently, and no input makes a read-only endpoint fail. Timeouts
 * in the configuration that no timer can hold are refused at start instead of firing at once.
 */
import t from "tap";
import { loadConfig } from "../../src/config.js";
import { postJson, startDaemon } from "../helpers/daemon.js";

const FOREVER = "2318-01-01T00:00:00.000Z";

t.test("huge keep_alive values mean forever and /api/ps keeps answering", async (t) => {
  const { url } = await startDaemon(t);
  for (const keep_alive of ["9999999999999999h", 1e300, "2562047h", "-9999999999999999h"]) {
    const res = await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", keep_alive });
    t.equal(res.status, 200, `keep_alive ${String(keep_alive)} is accepted`);
    const ps = await fetch(`${url}/api/ps`);
    t.equal(ps.status, 200, "/api/ps answers");
    const models = ((await ps.json()) as { models: { expires_at: string }[] }).models;
    t.equal(models[0]?.expires_at, FOREVER, `and reports forever for ${String(keep_alive)}`);
    for (const path of ["/api/tags", "/v1/models", "/metrics", "/readyz?model=tiny"]) t.equal((await fetch(`${url}${path}`)).status, 200, `${path} answers`);
  }
  // An ordinary keep-alive afterwards applies again.
  t.equal((await postJson(`${url}/api/generate`, { model: "tiny", prompt: "", keep_alive: "10m" })).status, 200);
  const [m] = ((await (await fetch(`${url}/api/ps`)).json()) as { models: { expires_at: string }[] }).models;
  const left = Date.parse(m?.expires_at ?? "") - Date.now();
  t.ok(left > 9 * 60_000 && left <= 10 * 60_000, `10m applies again (${Math.round(left / 1000)} s left)`);
});

t.test("timeouts no timer can hold are configuration errors", async (t) => {
  t.throws(() => loadConfig({ SERVICE_SHUTDOWN_TIMEOUT: "9999999h" }), {
    message: "invalid configuration: SERVICE_SHUTDOWN_TIMEOUT: must be at most 24 days (596h)",
  });
  t.throws(() => loadConfig({ SERVICE_LOAD_TIMEOUT: "100000h" }), { message: "invalid configuration: SERVICE_LOAD_TIMEOUT: must be at most 24 days (596h)" });
  t.equal(
    loadConfig({ SERVICE_KEEP_ALIVE: "9999999999999999h" }).keepAliveMs > 0,
    true,
    "a huge default keep-alive is accepted (the scheduler treats it as forever)",
  );
});
