/**
 * TLS for registries and mirrors: a custom CA (SERVICE_REGISTRY_CA) trusted besides the default
 * store, and TLS failures said in words that name the host and what to do.
 *
 * Node's `ca` option replaces the default roots; adding the file's certificates to a default
 * secure context keeps them (the bundled store, or the system's with --use-openssl-ca) and adds
 * these. That context starts from a copy of the store without NODE_EXTRA_CA_CERTS's certificates
 * (Node adds those to its shared store only), so they are added again.
 * There is no switch that turns verification off: `insecure: true` on a pull or push means plain
 * http, and only when the request asks for it.
 */
import fs from "node:fs/promises";
import tls from "node:tls";
import { HttpError } from "../errors.js";

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * A secure context trusting the default roots, the certificates of `nodeExtraCaFile`
 * (NODE_EXTRA_CA_CERTS, unreadable: skipped, as Node itself does with a warning) and every
 * certificate in the PEM file `caFile`.
 */
export async function secureContextWith(caFile: string, nodeExtraCaFile?: string): Promise<tls.SecureContext> {
  const extra = nodeExtraCaFile === undefined ? "" : await fs.readFile(nodeExtraCaFile, "utf8").catch(() => "");
  let text: string;
  try {
    text = await fs.readFile(caFile, "utf8");
  } catch (err) {
    throw new HttpError(500, `cannot read SERVICE_REGISTRY_CA ${caFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const certs = text.match(PEM_CERT) ?? [];
  if (certs.length === 0) throw new HttpError(500, `SERVICE_REGISTRY_CA ${caFile} holds no PEM certificate`);
  const context = tls.createSecureContext();
  const native = (context as unknown as { context: { addCACert(pem: string): void } }).context;
  for (const pem of extra.match(PEM_CERT) ?? []) {
    try {
      native.addCACert(pem);
    } catch {
      // Node skipped it too
    }
  }
  for (const pem of certs) {
    try {
      native.addCACert(pem);
    } catch {
      throw new HttpError(500, `SERVICE_REGISTRY_CA ${caFile} holds a certificate that cannot be read`);
    }
  }
  return context;
}

const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_UNTRUSTED",
  "CERT_SIGNATURE_FAILURE",
]);

/** A TLS failure talking to `host` in words, or undefined when `err` is not one. */
export function describeTls(err: unknown, host: string): string | undefined {
  const e = err as { code?: string; message?: string };
  const code = e?.code ?? "";
  if (UNTRUSTED.has(code)) {
    return `the TLS certificate of registry ${host} is not trusted (${e.message ?? code}); if your own CA signed it, set SERVICE_REGISTRY_CA to that CA's PEM file`;
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") return `the TLS certificate of registry ${host} is not valid for that name (${e.message ?? code})`;
  if (code === "CERT_HAS_EXPIRED") return `the TLS certificate of registry ${host} has expired`;
  if (code === "CERT_NOT_YET_VALID") return `the TLS certificate of registry ${host} is not valid yet (is this machine's clock right?)`;
  if (code === "ERR_SSL_WRONG_VERSION_NUMBER" || /wrong version number/i.test(e?.message ?? "")) {
    return `registry ${host} did not answer with TLS (a plain-http registry is reached with insecure: lmd pull --insecure)`;
  }
  if (code.startsWith("ERR_SSL_") || code.startsWith("ERR_TLS_") || code === "EPROTO") return `TLS with registry ${host} failed (${e.message ?? code})`;
  return undefined;
}
