/**
 * The firewall examples: nftables accepts the shipped ruleset (`nft -c -f`), and it loads for real
 * in a throwaway network namespace (never touching this machine's own firewall); the ufw and
 * firewalld scripts are valid shell.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { requireTool, runTool, tempDir } from "./helpers.js";

const NFT_EXAMPLE = fileURLToPath(new URL("../../examples/firewall/nftables.conf", import.meta.url));

t.test("nft -c -f accepts examples/firewall/nftables.conf", async (t) => {
  const nft = requireTool(t, "nft", "nftables");
  if (!nft) return;
  const checked = runTool(nft, ["-c", "-f", NFT_EXAMPLE]);
  t.equal(checked.status, 0, `nft -c: ${checked.output.trim() || "no complaints"}`);
  // The check can fail: a broken copy is refused.
  const broken = path.join(tempDir(t), "broken.nft");
  writeFileSync(broken, readFileSync(NFT_EXAMPLE, "utf8").replace("type ipv4_addr", "type ipv4_adr"));
  t.not(runTool(nft, ["-c", "-f", broken]).status, 0, "a misspelt ruleset is refused");
});

t.test("the ruleset loads in a fresh network namespace, and loads again (idempotent)", async (t) => {
  const nft = requireTool(t, "nft", "nftables");
  const unshare = requireTool(t, "unshare", "util-linux");
  if (!nft || !unshare) return;
  // An extra beyond `nft -c`: containers without CAP_SYS_ADMIN cannot make a namespace.
  const probe = runTool(unshare, ["--net", "true"]);
  if (probe.status !== 0) return void t.skip(`cannot create a network namespace here: ${probe.output.trim()}`);
  const loaded = runTool(unshare, ["--net", "sh", "-c", `${nft} -f ${NFT_EXAMPLE} && ${nft} -f ${NFT_EXAMPLE} && ${nft} list table inet lmd`]);
  t.equal(loaded.status, 0, loaded.output.slice(0, 300));
  t.match(loaded.output, /tcp dport @lmd_ports ip saddr @lmd_clients_v4 accept/);
  t.match(loaded.output, /tcp dport @lmd_ports counter packets 0 bytes 0 drop/);
});

t.test("the ufw and firewalld scripts are valid shell", async (t) => {
  for (const script of ["ufw.sh", "firewalld.sh"]) {
    const file = fileURLToPath(new URL(`../../examples/firewall/${script}`, import.meta.url));
    t.equal(runTool("sh", ["-n", file]).status, 0, `${script} parses`);
  }
});
