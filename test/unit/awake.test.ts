/**
 * The runner's main thread kept awake while a GPU model decodes (src/runner/awake.ts): which loads
 * get it, and that the kick keeps one chain of event-loop turns going exactly while busy.
 */
import t from "tap";
import { awakeFor, awakeWhile } from "../../src/runner/awake.js";

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

t.test("only a model with every layer on a GPU", async (t) => {
  t.equal(awakeFor(21, 21), true, "every layer offloaded");
  t.equal(awakeFor(20, 21), false, "one layer on the CPU: its decoding threads need the cores");
  t.equal(awakeFor(0, 21), false, "on the CPU");
  t.equal(awakeFor(0, 0), false, "a model that reports no layers stays on the CPU rule");
});

t.test("the kick keeps the event loop turning while busy, one chain of turns, and stops after", async (t) => {
  let busy = true;
  let checks = 0;
  const kick = awakeWhile(() => (checks++, busy));
  kick();
  kick();
  await turns(20);
  t.ok(checks >= 18 && checks <= 22, `one check a turn while busy, however often kicked (${checks} in 20 turns)`);
  busy = false;
  await turns(2);
  const stopped = checks;
  await turns(10);
  t.equal(checks, stopped, "no turn kept after busy ends");
  busy = true;
  kick();
  await turns(5);
  t.ok(checks > stopped, "a later kick starts a chain again");
  busy = false;
  await turns(2);
});
