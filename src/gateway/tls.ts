/**
 * TLS material: the certificate chain and private key read from files, at start and on SIGHUP.
 * A reload builds a new secure context for new connections; open connections keep theirs, so
 * streams in flight are not dropped.
 */
import { readFile } from "node:fs/promises";
import { createSecureContext, type SecureContextOptions } from "node:tls";
import { ConfigError } from "../config.js";

/** Reads the PEM files and checks that they form a usable context; problems name their variable. */
export async function readTlsFiles(files: { certFile: string; keyFile: string }): Promise<SecureContextOptions> {
  const cert = await readOrFail("GATEWAY_TLS_CERT", files.certFile);
  const key = await readOrFail("GATEWAY_TLS_KEY", files.keyFile);
  const options: SecureContextOptions = { cert, key };
  try {
    // Throws "key values mismatch" and the like now, instead of failing every handshake later.
    createSecureContext(options);
  } catch (err) {
    throw new ConfigError(
      "GATEWAY_TLS_KEY",
      `${files.keyFile} and ${files.certFile} do not form a usable TLS identity: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return options;
}

async function readOrFail(variable: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new ConfigError(variable, `cannot read '${file}': ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}
