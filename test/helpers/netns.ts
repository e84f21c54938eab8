/**
 * An address that is neither loopback nor link-local, for tests of the registry's address rules:
 * a veth pair whose one end sits in a network namespace the test creates, with an address from
 * 10.200.0.0/16 that exists only on that pair. Both are removed on teardown. Without root (or
 * `ip`), `reason` says why there is none, for the test to skip.
 */
import { execFileSync } from "node:child_process";
import type { Test } from "tap";

export function privateAddress(t: Test): { address?: string; reason?: string } {
  const id = process.pid % 100_000;
  const ns = `lmdssrf${id}`;
  const link = `lmds${id}`;
  const address = `10.200.${id % 250}.1`;
  const ip = (...args: string[]) => execFileSync("ip", args, { stdio: "pipe" });
  try {
    ip("netns", "add", ns);
    t.teardown(() => void ip("netns", "del", ns));
    ip("link", "add", link, "type", "veth", "peer", "name", `${link}p`, "netns", ns);
    t.teardown(() => void ip("link", "del", link));
    ip("addr", "add", `${address}/30`, "dev", link);
    ip("link", "set", link, "up");
    return { address };
  } catch (err) {
    return { reason: `cannot make a network namespace and veth pair (root and iproute2 needed): ${String((err as Error).message).split("\n")[0]}` };
  }
}
