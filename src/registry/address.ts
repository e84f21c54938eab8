/**
 * Where a registry may send the client (blind SSRF).
 *
 * A registry answers redirects (blob downloads go to a CDN) and names token realms; a hostile one
 * could point them at `http://127.0.0.1:<port>/internal` or a cloud metadata address, and the
 * daemon would fetch it from inside the network. So every connection's address is classified, and
 * a registry may only lead the client to addresses at least as "outside" as its own:
 *
 *   registry on loopback  → anything (it is already the operator's own machine)
 *   registry on a private network (RFC 1918, CGNAT, IPv6 ULA) → private or public, never loopback or link-local
 *   registry on a public address → public only
 *
 * The check lives in the socket's DNS lookup, so the address that was checked is the address that
 * is connected to (no second resolution for a rebinding DNS server to answer differently). IP
 * literals skip Node's lookup, so they are checked before the request ({@link checkLiteral}).
 * `insecure: true` does not lift it: that flag comes from the request body, which is exactly what
 * a web page or a gateway key holder controls.
 */
import dns from "node:dns";
import net, { BlockList } from "node:net";

/** From most to least trusted. */
export type AddressClass = "loopback" | "linklocal" | "private" | "public";

const loopback = new BlockList();
loopback.addSubnet("127.0.0.0", 8, "ipv4");
loopback.addSubnet("0.0.0.0", 8, "ipv4"); // connecting to 0.0.0.0 reaches this machine
loopback.addAddress("::1", "ipv6");
loopback.addAddress("::", "ipv6");
const linkLocal = new BlockList();
linkLocal.addSubnet("169.254.0.0", 16, "ipv4"); // cloud metadata services live here
linkLocal.addSubnet("fe80::", 10, "ipv6");
const privateNets = new BlockList();
for (const [a, bits] of [["10.0.0.0", 8], ["172.16.0.0", 12], ["192.168.0.0", 16], ["100.64.0.0", 10]] as const) privateNets.addSubnet(a, bits, "ipv4");
privateNets.addSubnet("fc00::", 7, "ipv6");

/** The class of an IP address (IPv4-mapped IPv6 addresses are classified as their IPv4 address). */
export function classify(address: string): AddressClass {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const ip = mapped ?? address;
  const family = net.isIPv6(ip) ? "ipv6" : "ipv4";
  if (loopback.check(ip, family)) return "loopback";
  if (linkLocal.check(ip, family)) return "linklocal";
  if (privateNets.check(ip, family)) return "private";
  return "public";
}

/** True when a registry whose address is of class `registry` may lead the client to `target`. */
export function allowed(registry: AddressClass, target: AddressClass): boolean {
  if (registry === "loopback") return true;
  if (registry === "private") return target === "private" || target === "public";
  return target === "public";
}

/** The refusal, with a code the registry client turns into its message. */
export class AddressRefusedError extends Error {
  readonly code = "LMD_ADDRESS_REFUSED";
  constructor(host: string, address: string, kind: AddressClass) {
    const what = `a ${kind === "linklocal" ? "link-local" : kind} address, where a registry on another network may not send lmd`;
    super(host === address ? `${host} is ${what}` : `${host} resolves to ${address}, ${what}`);
  }
}

/** Strips the brackets of an IPv6 URL host. */
export function bareHost(hostname: string): string {
  return hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
}

/**
 * The policy of one registry client: the registry's own class is fixed by the first address its
 * host resolves to, and every later connection must be allowed from it.
 */
export class AddressPolicy {
  private registryClass: AddressClass | undefined;
  /**
   * Set when registry traffic goes through a proxy (registry/http.ts): the proxy resolves names,
   * so a name that does not resolve here is the proxy's to reach (a registry whose name does not
   * resolve here is treated as public, the strictest class), and {@link checkName} checks targets.
   */
  proxied = false;

  constructor(private readonly registryHost: string) {}

  /** Classifies the registry's host (once); resolving it fails like a connection would. */
  async init(): Promise<void> {
    if (this.registryClass) return;
    const host = bareHost(this.registryHost);
    try {
      const address = net.isIP(host) ? host : (await dns.promises.lookup(host)).address;
      this.registryClass = classify(address);
    } catch (err) {
      if (!this.proxied || !unresolved(err)) throw err;
      this.registryClass = "public";
    }
  }

  /**
   * Through a proxy the socket's lookup sees the proxy, not the target: the target's name is
   * resolved here and every address it has must be allowed. A name that does not resolve here is
   * left to the proxy (a server that reaches the internet only through a proxy often has no
   * public DNS); IP literals are always checked.
   */
  async checkName(hostname: string): Promise<void> {
    await this.init();
    const host = bareHost(hostname);
    if (net.isIP(host)) return this.checkLiteral(host);
    let addresses: dns.LookupAddress[];
    try {
      addresses = await dns.promises.lookup(host, { all: true });
    } catch (err) {
      if (unresolved(err)) return;
      throw err;
    }
    const registry = this.registryClass ?? "public";
    const refused = addresses.find((a) => !allowed(registry, classify(a.address)));
    if (refused) throw new AddressRefusedError(hostname, refused.address, classify(refused.address));
  }

  /** Throws when the IP literal `hostname` may not be reached (names are checked by {@link lookup}). */
  checkLiteral(hostname: string): void {
    const host = bareHost(hostname);
    if (!net.isIP(host) || !this.registryClass) return;
    const kind = classify(host);
    if (!allowed(this.registryClass, kind)) throw new AddressRefusedError(host, host, kind);
  }

  /** A `net.connect` lookup that resolves, checks and pins the address. */
  readonly lookup = (
    hostname: string,
    options: dns.LookupOptions,
    callback: (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void,
  ): void => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const registry = this.registryClass ?? "public";
      const ok = addresses.filter((a) => allowed(registry, classify(a.address)));
      if (ok.length === 0) {
        const first = addresses[0];
        return callback(first ? new AddressRefusedError(hostname, first.address, classify(first.address)) : new Error(`no address for ${hostname}`), []);
      }
      if (options.all) return callback(null, ok);
      callback(null, ok[0]!.address, ok[0]!.family);
    });
  };
}

/** A name that has no address here (as opposed to a failure of the resolver itself). */
function unresolved(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ENODATA";
}
