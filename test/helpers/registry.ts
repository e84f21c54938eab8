/**
 * A loopback Docker-registry-v2 (OCI distribution) server for pull/push tests. Nothing leaves
 * the machine: two servers on 127.0.0.1:0, the registry and a separate blob host it redirects to.
 *
 * - `GET/HEAD /v2/<repo>/manifests/<tag>`, `GET/HEAD /v2/<repo>/blobs/<digest>` (307 to the blob
 *   host with `redirect: true`), `Range` requests (206), `ETag`.
 * - Push: `POST /v2/<repo>/blobs/uploads/` → 202 + Location, `PATCH <location>` appends,
 *   `PUT <location>?digest=` checks the sha256 and stores (201), `PUT /v2/<repo>/manifests/<tag>`.
 * - `auth: true`: every `/v2/` request needs `Authorization: Bearer <token>`; otherwise 401 with
 *   `WWW-Authenticate: Bearer realm=".../token",service=...,scope=...`; `GET /token` issues one
 *   (with `tokenCredentials`, only to a request with those Basic credentials; 401 otherwise).
 * - Faults (`registry.faults`): cut a blob off after N bytes (`cut`), stall after N bytes
 *   (`stall`, once or for good), serve wrong bytes (`corrupt`), answer a status (`failStatus`),
 *   hang on manifests before or after the head (`manifestHang`), redirect blob GETs anywhere
 *   (`redirectTo`, a hostile registry).
 * - `address`: listen somewhere other than 127.0.0.1 (a private address of the test's own).
 * - Counters (`registry.stats`): bytes of each blob served, every blob request with its Range,
 *   host and Authorization header, token and manifest requests.
 *
 * Example:
 *   const reg = await startTestRegistry(t, { auth: true, redirect: true });
 *   reg.addModel("library/tiny", "latest", [{ mediaType: MEDIA.model, data: gguf }]);
 *   // then pull `${reg.host}/library/tiny:latest` with `insecure: true`
 */
import { createHash, randomBytes } from "node:crypto";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Test } from "tap";

export interface TestLayer {
  mediaType: string;
  data: Buffer;
}

export interface BlobRequest {
  digest: string;
  server: "registry" | "blobhost";
  method: string;
  range: string | undefined;
  authorization: string | undefined;
}

export interface RegistryFaults {
  /** Destroy the connection after `bytes` bytes of this blob's body, `times` times (default 1). */
  cut?: { digest: string; bytes: number; times?: number };
  /** Send `bytes` bytes of this blob, then hang; `reached` resolves when they were written. */
  stall?: { digest: string; bytes: number; reached?: () => void; persist?: boolean };
  /** Serve this blob with its first byte changed. */
  corrupt?: string;
  /** Answer `status` to requests whose path matches, `times` times (default forever). */
  failStatus?: { path: RegExp; status: number; times?: number };
  /** Manifest GETs: send the headers (declaring `length` bytes) and `bytes` bytes, then hang; no headers at all when `length` is undefined. */
  manifestHang?: { length?: number; bytes?: number };
  /** Blob GETs on the registry answer 307 to this URL instead of serving (a hostile redirect). */
  redirectTo?: string;
}

export interface RegistryStats {
  /** Body bytes written per blob digest (both hosts). */
  bytesServed: Map<string, number>;
  blobRequests: BlobRequest[];
  tokenRequests: number;
  manifestRequests: number;
}

export interface TestRegistry {
  /** `http://127.0.0.1:<port>` of the registry (or the `address` option). */
  url: string;
  /** `127.0.0.1:<port>`: the host part of model names (`<host>/<ns>/<model>:<tag>`). */
  host: string;
  /** `http://127.0.0.1:<port>` of the blob host. */
  blobUrl: string;
  blobs: Map<string, Buffer>;
  /** Raw manifests by `<repo>:<tag>`. */
  manifests: Map<string, Buffer>;
  stats: RegistryStats;
  faults: RegistryFaults;
  /** Stores blobs and a manifest; returns the manifest object. */
  addModel(repo: string, tag: string, layers: TestLayer[], config?: Buffer): Record<string, unknown>;
  /** Stores a blob; returns its digest. */
  addBlob(data: Buffer): string;
  /** Stores any manifest value as is (for malformed or malicious manifests). */
  setManifest(repo: string, tag: string, manifest: unknown): void;
  close(): Promise<void>;
}

export interface RegistryOptions {
  /** Require bearer tokens (the challenge flow). */
  auth?: boolean;
  /** Redirect blob GETs to the blob host (as registry.ollama.ai redirects to its CDN). */
  redirect?: boolean;
  /** Realm to announce instead of this registry's own `/token` (to test a foreign realm). */
  realm?: string;
  /** `user:password` the token endpoint requires as Basic authentication (a private registry). */
  tokenCredentials?: string;
  /** Address both servers listen on (default 127.0.0.1). */
  address?: string;
}

export const sha256 = (data: Buffer | string): string => `sha256:${createHash("sha256").update(data).digest("hex")}`;

const MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json";

/** Starts the registry and its blob host on loopback; both close on teardown. */
export async function startTestRegistry(t: Test, options: RegistryOptions = {}): Promise<TestRegistry> {
  const blobs = new Map<string, Buffer>();
  const manifests = new Map<string, Buffer>();
  const uploads = new Map<string, Buffer[]>();
  const tokens = new Set<string>();
  const stats: RegistryStats = { bytesServed: new Map(), blobRequests: [], tokenRequests: 0, manifestRequests: 0 };
  const faults: RegistryFaults = {};
  const stalled = new Set<ServerResponse>();

  const serveBlob = (req: IncomingMessage, res: ServerResponse, digest: string, server: BlobRequest["server"]) => {
    stats.blobRequests.push({ digest, server, method: req.method ?? "", range: req.headers.range, authorization: req.headers.authorization });
    let data = blobs.get(digest);
    if (!data) return json(res, 404, { errors: [{ code: "BLOB_UNKNOWN", message: "blob unknown" }] });
    if (faults.corrupt === digest) data = Buffer.concat([Buffer.from([data[0]! ^ 0xff]), data.subarray(1)]);
    let start = 0;
    let end = data.length - 1;
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (m) {
      start = Number(m[1]);
      end = m[2] ? Math.min(Number(m[2]), data.length - 1) : data.length - 1;
      if (start > end) return res.writeHead(416, { "content-range": `bytes */${data.length}` }).end();
    }
    const body = data.subarray(start, end + 1);
    const headers = {
      "content-type": "application/octet-stream",
      "content-length": body.length,
      etag: `"${digest}"`,
      "accept-ranges": "bytes",
      ...(m ? { "content-range": `bytes ${start}-${end}/${data.length}` } : {}),
    };
    res.writeHead(m ? 206 : 200, headers);
    if (req.method === "HEAD") return res.end();
    const count = (n: number) => stats.bytesServed.set(digest, (stats.bytesServed.get(digest) ?? 0) + n);
    const cut = faults.cut?.digest === digest && (faults.cut.times ?? 1) > 0 ? faults.cut : undefined;
    const stall = faults.stall?.digest === digest ? faults.stall : undefined;
    const limit = cut ? cut.bytes : stall ? stall.bytes : undefined;
    if (limit === undefined || limit >= body.length) {
      count(body.length);
      return res.end(body);
    }
    const first = body.subarray(0, limit);
    count(first.length);
    res.write(first, () => {
      if (cut) {
        cut.times = (cut.times ?? 1) - 1;
        setTimeout(() => res.destroy(), 20); // let the bytes reach the client, then cut the connection
      } else {
        if (!stall?.persist) faults.stall = undefined; // the next request is served normally
        stalled.add(res);
        stall?.reached?.();
      }
    });
  };

  const blobHost = http.createServer((req, res) => {
    const m = /^\/blobs\/(sha256:[a-f0-9]{64})/.exec(req.url ?? "");
    if (!m?.[1]) return json(res, 404, { errors: [{ code: "NOT_FOUND" }] });
    serveBlob(req, res, m[1], "blobhost");
  });

  // Some routes answer after reading the body: the handler may return a promise, which node:http ignores.
  const registry = http.createServer((req, res) => void registryRoute(req, res));
  const registryRoute = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://x");
    const fail = faults.failStatus;
    if (fail && fail.path.test(url.pathname) && (fail.times ?? Infinity) > 0) {
      fail.times = (fail.times ?? Infinity) - 1;
      return json(res, fail.status, { errors: [{ code: "UNAVAILABLE" }] });
    }
    if (url.pathname === "/token") {
      stats.tokenRequests++;
      if (options.tokenCredentials !== undefined && req.headers.authorization !== `Basic ${Buffer.from(options.tokenCredentials).toString("base64")}`) {
        return json(res, 401, { errors: [{ code: "UNAUTHORIZED", message: "invalid username or password" }] });
      }
      const token = randomBytes(8).toString("hex");
      tokens.add(token);
      return json(res, 200, { token });
    }
    if (url.pathname === "/v2/" || url.pathname === "/v2") return json(res, 200, {});
    const route = /^\/v2\/(.+?)\/(manifests|blobs\/uploads|blobs)\/?(.*)$/.exec(url.pathname);
    if (!route) return json(res, 404, { errors: [{ code: "NOT_FOUND" }] });
    const [, repo = "", kind, rest = ""] = route;
    if (options.auth) {
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      if (!token || !tokens.has(token)) {
        const action = req.method === "GET" || req.method === "HEAD" ? "pull" : "pull,push";
        const realm = options.realm ?? `http://${host}/token`;
        res.setHeader("www-authenticate", `Bearer realm="${realm}",service="test-registry",scope="repository:${repo}:${action}"`);
        return json(res, 401, { errors: [{ code: "UNAUTHORIZED" }] });
      }
    }
    if (kind === "manifests") return manifestRoute(req, res, `${repo}:${rest}`);
    if (kind === "blobs") {
      if (faults.redirectTo && req.method === "GET") {
        stats.blobRequests.push({ digest: rest, server: "registry", method: "GET", range: req.headers.range, authorization: req.headers.authorization });
        return res.writeHead(307, { location: faults.redirectTo }).end();
      }
      if (options.redirect && req.method === "GET") {
        stats.blobRequests.push({ digest: rest, server: "registry", method: "GET", range: req.headers.range, authorization: req.headers.authorization });
        res.writeHead(307, { location: `${blobUrl}/blobs/${rest}?sig=${randomBytes(4).toString("hex")}` });
        return res.end();
      }
      return serveBlob(req, res, rest, "registry");
    }
    return uploadRoute(req, res, repo, rest, url);
  };

  const manifestRoute = (req: IncomingMessage, res: ServerResponse, key: string) => {
    if (req.method === "PUT") {
      return readAll(req).then((body) => {
        manifests.set(key, body);
        res.writeHead(201, { "docker-content-digest": sha256(body) }).end();
      });
    }
    stats.manifestRequests++;
    const hang = faults.manifestHang;
    if (hang) {
      stalled.add(res);
      if (hang.length === undefined) return; // never answer
      res.writeHead(200, { "content-type": MANIFEST_TYPE, "content-length": hang.length });
      res.write(Buffer.alloc(hang.bytes ?? 0, 0x20));
      return; // and hang
    }
    const body = manifests.get(key);
    if (!body) return json(res, 404, { errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }] });
    res.writeHead(200, { "content-type": MANIFEST_TYPE, "content-length": body.length, "docker-content-digest": sha256(body) });
    res.end(req.method === "HEAD" ? undefined : body);
  };

  const uploadRoute = async (req: IncomingMessage, res: ServerResponse, repo: string, id: string, url: URL) => {
    if (req.method === "POST" && id === "") {
      const uuid = randomBytes(8).toString("hex");
      uploads.set(uuid, []);
      return res.writeHead(202, { location: `/v2/${repo}/blobs/uploads/${uuid}`, "docker-upload-uuid": uuid, range: "0-0" }).end();
    }
    const parts = uploads.get(id);
    if (!parts) return json(res, 404, { errors: [{ code: "BLOB_UPLOAD_UNKNOWN" }] });
    parts.push(await readAll(req));
    const size = parts.reduce((n, p) => n + p.length, 0);
    if (req.method === "PATCH") return res.writeHead(202, { location: `/v2/${repo}/blobs/uploads/${id}`, range: `0-${Math.max(0, size - 1)}` }).end();
    if (req.method === "PUT") {
      const data = Buffer.concat(parts);
      const digest = url.searchParams.get("digest") ?? "";
      uploads.delete(id);
      if (sha256(data) !== digest) return json(res, 400, { errors: [{ code: "DIGEST_INVALID" }] });
      blobs.set(digest, data);
      return res.writeHead(201, { location: `/v2/${repo}/blobs/${digest}`, "docker-content-digest": digest }).end();
    }
    return json(res, 405, { errors: [{ code: "UNSUPPORTED" }] });
  };

  const address = options.address ?? "127.0.0.1";
  const listen = (server: http.Server) => new Promise<number>((resolve) => server.listen(0, address, () => resolve((server.address() as AddressInfo).port)));
  const host = `${address}:${await listen(registry)}`;
  const blobUrl = `http://${address}:${await listen(blobHost)}`;
  const close = async () => {
    for (const res of stalled) res.destroy();
    registry.closeAllConnections();
    blobHost.closeAllConnections();
    await Promise.all([new Promise((r) => registry.close(r)), new Promise((r) => blobHost.close(r))]);
  };
  t.teardown(close);

  const addBlob = (data: Buffer) => {
    const digest = sha256(data);
    blobs.set(digest, data);
    return digest;
  };
  return {
    url: `http://${host}`,
    host,
    blobUrl,
    blobs,
    manifests,
    stats,
    faults,
    addBlob,
    addModel(repo, tag, layers, config) {
      const cfg =
        config ?? Buffer.from(JSON.stringify({ model_format: "gguf", model_family: "llama", model_families: ["llama"], model_type: "", file_type: "Q8_0" }));
      const manifest = {
        schemaVersion: 2,
        mediaType: MANIFEST_TYPE,
        config: { mediaType: "application/vnd.docker.container.image.v1+json", digest: addBlob(cfg), size: cfg.length },
        layers: layers.map((l) => ({ mediaType: l.mediaType, digest: addBlob(l.data), size: l.data.length })),
      };
      manifests.set(`${repo}:${tag}`, Buffer.from(JSON.stringify(manifest)));
      return manifest;
    },
    setManifest(repo, tag, manifest) {
      manifests.set(`${repo}:${tag}`, Buffer.from(JSON.stringify(manifest)));
    },
    close,
  };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { "content-type": "application/json", "content-length": data.length }).end(data);
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
