/**
 * The HTTP baseline: a bare node:http server answering GET /api/version with the same JSON body
 * lmd sends. Forked by bench/http.ts; tells its parent the port over IPC.
 */
import http from "node:http";
import { VERSION } from "../src/version.js";

const body = JSON.stringify({ version: VERSION });
const server = http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
  res.end(body);
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.send?.({ port: typeof address === "object" && address ? address.port : 0 });
});
// autocannon leaves keep-alive connections open; close() would wait for them.
process.on("SIGTERM", () => process.exit(0));
