/**
 * Blind SSRF through a registry's redirects. A registry that is not on loopback
 * may not send lmd to loopback, link-local or (from a public registry) private addresses; the
 * address is checked where the socket resolves it, so a DNS name is caught as well as a literal.
 *
 * The registry needs an address that is not loopback: the test makes a veth pair whose one end
 * sits in a network namespace it creates, with addresses from 10.200.0.0/16 that exist only on
 * that pair, and removes both on teardown. Without root (or `ip`), the test is skipped.
 */
import t from "tap";
import { readdirSync } from "node:fs";
import fs from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { assertError } from "../helpers/assert-error.js";
import { postJson, startDaemon } from "../helpers/daemon.js";
import { testGguf } from "../helpers/models.js";
import { privateAddress } from "../helpers/netns.js";
import { sha256, startTestRegistry } from "../helpers/registry.js";

const MODEL = "application/vnd.ollama.image.model";

const made = privateAddress(t);

t.test("a registry on a private network may not redirect lmd to loopback or link-local addresses", { skip: made.reason ?? false }, async (t) => {
  const secret = http.createServer((_req, res) => {
    hits++;
    res.end("internal secret");
  });
  let hits = 0;
  await new Promise<void>((resolve) => secret.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise((resolve) => secret.close(resolve)));
  const port = (secret.address() as AddressInfo).port;

  const reg = await startTestRegistry(t, { address: made.address, redirect: true });
  const gguf = await fs.readFile(await testGguf());
  reg.addModel("library/tiny", "latest", [{ mediaType: MODEL, data: gguf }]);
  const short = sha256(gguf).slice(7, 19);
  const { url, config } = await startDaemon(t, { models: [] });
  const pull = () => postJson(`${url}/api/pull`, { model: `${reg.host}/library/tiny`, insecure: true, stream: false });

  reg.faults.redirectTo = `http://127.0.0.1:${port}/internal/secret`;
  await assertError(
    t,
    await pull(),
    500,
    `pull ${short}: registry redirect refused: 127.0.0.1 is a loopback address, where a registry on another network may not send lmd`,
  );
  reg.faults.redirectTo = `http://localhost:${port}/internal/secret`; // a name: caught where it resolves
  await assertError(
    t,
    await pull(),
    500,
    new RegExp(`^pull ${short}: registry redirect refused: localhost resolves to (127\\.0\\.0\\.1|::1), a loopback address`),
  );
  reg.faults.redirectTo = "http://169.254.169.254/latest/meta-data/";
  await assertError(
    t,
    await pull(),
    500,
    `pull ${short}: registry redirect refused: 169.254.169.254 is a link-local address, where a registry on another network may not send lmd`,
  );
  t.equal(hits, 0, "the internal server was never reached");
  t.same(readdirSync(path.join(config.models, "blobs")), [], "refused redirects leave no partial file");

  reg.faults.redirectTo = undefined; // its own blob host on the same private network is fine
  t.same(await (await pull()).json(), { status: "success" });
  t.ok(reg.stats.blobRequests.some((r) => r.server === "blobhost"), "the blob came through the redirect");
});
