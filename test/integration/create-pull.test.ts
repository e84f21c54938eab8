/**
 * `POST /api/create` from a model that is not in the store pulls it first, as Ollama does (a
 * Modelfile's `FROM llama3.2` on a fresh host): against Debian's `docker-registry` with TLS (a CA
 * the test makes, trusted through SERVICE_REGISTRY_CA, as a team's private registry is). The
 * pull's progress lines come before the create's, the base model lands in the store beside the new
 * one, and a base the registry does not know is its 404, streamed or not.
 */
import path from "node:path";
import t from "tap";
import { requireTool, tempDir } from "../gateway/helpers.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson, readNdjson, startDaemon } from "../helpers/daemon.js";
import { makeCa, startDistribution } from "../helpers/docker-registry.js";

t.test("create from a model not in the store pulls it from its registry", async (t) => {
  const binary = requireTool(t, "docker-registry", "docker-registry");
  if (!binary) return;
  const dir = tempDir(t);
  const tls = makeCa(dir);
  const registry = await startDistribution(t, binary, path.join(dir, "registry"), { tls });
  const env = { SERVICE_REGISTRY_CA: tls.ca };
  const base = `${registry.host}/team/tiny:v1`;

  // One host pushes its model; another, with an empty store, creates a model from it.
  const publisher = await startDaemon(t, { env });
  t.equal((await postJson(`${publisher.url}/api/copy`, { source: "tiny", destination: base })).status, 200);
  const pushed = await postJson(`${publisher.url}/api/push`, { model: base, stream: false });
  t.same(await pushed.json(), { status: "success" }, "pushed");

  const { url } = await startDaemon(t, { env, models: [] });
  const res = await postJson(`${url}/api/create`, { model: "storyteller", from: base, system: "You tell short stories." });
  t.equal(res.status, 200);
  const statuses = (await readNdjson(res)).map((l) => String(l.status ?? `error: ${String(l.error)}`));
  t.equal(statuses[0], "pulling manifest", "the pull comes first");
  const pullEnd = statuses.indexOf("writing manifest");
  t.ok(statuses.slice(0, pullEnd).some((s) => s.startsWith("pulling ") && s !== "pulling manifest"), "the pull's layers are reported");
  t.ok(statuses.slice(pullEnd + 1).some((s) => s.startsWith("using existing layer sha256:")), "then the create's own lines");
  t.equal(statuses.at(-1), "success", statuses.join(" | "));

  const tags = (await (await fetch(`${url}/api/tags`)).json()) as { models: { name: string }[] };
  t.same(tags.models.map((m) => m.name).sort(), [base, "storyteller:latest"].sort(), "the base model is stored too");
  const show = (await (await postJson(`${url}/api/show`, { model: "storyteller" })).json()) as { system: string };
  t.equal(show.system, "You tell short stories.");
  const answer = await postJson(`${url}/api/generate`, { model: "storyteller", prompt: "Once", stream: false, options: { num_predict: 2 } });
  t.equal(answer.status, 200, "the created model serves");

  const unknown = `${registry.host}/team/nope:v1`;
  await assertError(
    t,
    await postJson(`${url}/api/create`, { model: "x", from: unknown, stream: false }),
    404,
    `model '${unknown}' not found in the registry`,
  );
  const streamed = await readNdjson(await postJson(`${url}/api/create`, { model: "x", from: unknown }));
  t.same(streamed.at(-1), { error: `model '${unknown}' not found in the registry` }, "streamed: the stream's last line");
  t.equal((await postJson(`${url}/api/show`, { model: "x" })).status, 404, "nothing was created");
});
