/**
 * A store's small layers cannot make the daemon use memory. The registry path
 * (a pull of a manifest declaring a 300 MiB config) is refused in registry-hostile.test.ts; here the
 * store is crafted by hand, as a copied-in Ollama store could be: a 300 MiB config layer and a
 * 64 MiB template layer (sparse files, so they cost no disk). The forked daemon's peak RSS
 * (VmHWM) stays under 384 MiB while `/api/tags` runs 4 at a time; the model with the oversized
 * template fails alone with a clear 500; create refuses an oversized field with 400.
 */
import t from "tap";
import { existsSync, readFileSync } from "node:fs";
import fs from "node:fs/promises";
import { ModelStore, MEDIA, type Manifest } from "../../src/store/store.js";
import { assertError } from "../helpers/assert-error.js";
import { postJson } from "../helpers/daemon.js";
import { installTestModels } from "../helpers/models.js";
import { forkDaemon } from "../helpers/process.js";

/** The documented bound (docs/security.md): the daemon with a few tiny models peaks near 140 MiB; one read of the 300 MiB config alone would pass it. */
const RSS_BOUND_MIB = 384;

/** Peak resident set of a process, in MiB (Linux). */
function peakRssMiB(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? NaN) / 1024;
}

/** A sparse file of `size` bytes as a blob named by a made-up (well-formed) digest. */
async function sparseBlob(store: ModelStore, hexChar: string, size: number): Promise<string> {
  const digest = `sha256:${hexChar.repeat(64)}`;
  const fh = await fs.open(store.blobPath(digest), "w");
  await fh.truncate(size);
  await fh.close();
  return digest;
}

const needsProc = { skip: existsSync("/proc/self/status") ? false : "needs /proc" };

t.test("oversized small layers in the store: bounded memory, one model fails alone", needsProc, async (t) => {
  const dir = t.testdir();
  const store = new ModelStore(dir);
  await store.init();
  await installTestModels(store, [{ name: "tiny" }]);
  const tiny = (await store.findModel("tiny"))!.manifest;
  const model = tiny.layers.find((l) => l.mediaType === MEDIA.model)!;
  const configSize = 300 * 1024 * 1024;
  const templateSize = 64 * 1024 * 1024;
  const fatConfig: Manifest = { ...tiny, config: { mediaType: MEDIA.config, digest: await sparseBlob(store, "c", configSize), size: configSize } };
  await store.writeManifest("fatconfig", fatConfig);
  await store.writeManifest("fattemplate", {
    ...tiny,
    layers: [model, { mediaType: MEDIA.template, digest: await sparseBlob(store, "e", templateSize), size: templateSize }],
  });

  const daemon = await forkDaemon(t, { SERVICE_HOST: "127.0.0.1:0", SERVICE_MODELS: dir });
  const pid = daemon.child.pid!;
  const started = peakRssMiB(pid);
  for (let round = 0; round < 3; round++) {
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        fetch(`${daemon.url}/api/tags`).then(async (r) => ({ status: r.status, body: (await r.json()) as { models: Array<{ name: string }> } })),
      ),
    );
    for (const a of answers) {
      t.equal(a.status, 200);
      t.same(a.body.models.map((m) => m.name).sort(), ["fatconfig:latest", "fattemplate:latest", "tiny:latest"]);
    }
  }
  const peak = peakRssMiB(pid);
  t.comment(`peak RSS: ${started.toFixed(0)} MiB after start, ${peak.toFixed(0)} MiB after 12 /api/tags`);
  t.ok(peak < RSS_BOUND_MIB, `peak RSS ${peak.toFixed(0)} MiB stays under ${RSS_BOUND_MIB} MiB`);

  const reason = `template layer of ${templateSize} bytes is over the limit of 1048576`;
  await assertError(t, await postJson(`${daemon.url}/api/show`, { model: "fattemplate" }), 500, `failed to load model 'fattemplate': ${reason}`);
  await assertError(
    t,
    await postJson(`${daemon.url}/api/generate`, { model: "fattemplate", prompt: "hi", stream: false }),
    500,
    `failed to load model 'fattemplate': ${reason}`,
  );
  const ok = await postJson(`${daemon.url}/api/generate`, { model: "tiny", prompt: "hi", stream: false, options: { num_predict: 2 } });
  t.equal(ok.status, 200, "the other models are served");
  t.ok(peakRssMiB(pid) < RSS_BOUND_MIB, "still under the bound");

  await assertError(
    t,
    await postJson(`${daemon.url}/api/create`, { model: "big", from: "tiny", template: "x".repeat(2 * 1024 * 1024) }),
    400,
    "template layer of 2097152 bytes is over the limit of 1048576",
  );
  await assertError(
    t,
    await postJson(`${daemon.url}/api/create`, { model: "big", from: "tiny", license: ["ok", "y".repeat(1024 * 1024 + 1)] }),
    400,
    "license layer of 1048577 bytes is over the limit of 1048576",
  );
  daemon.child.kill("SIGTERM");
  await daemon.exited;
});
