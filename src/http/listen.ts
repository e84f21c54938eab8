/**
 * Listening where a `<host>:<port>` setting says (SERVICE_HOST, GATEWAY_HOST): shared by the
 * daemon and the gateway.
 */
import type { Server } from "node:net";
import type { AddressInfo } from "node:net";
import type { ListenAddress } from "../config.js";

/** Starts listening; resolves with the bound address, rejects on EADDRINUSE and the like. */
export function listenOn(server: Server, address: ListenAddress): Promise<AddressInfo> {
  return new Promise<AddressInfo>((resolve, reject) => {
    server.once("error", reject);
    // An empty host means all interfaces: Node then binds [::] with IPv4 mapped, or 0.0.0.0.
    const host = address.host === "" ? undefined : address.host;
    server.listen({ port: address.port, host }, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}
