/**
 * Preloaded into every test process (package.json, tap's `node-arg`): the node processes a test
 * starts (daemons, runners, the CLI) run without tap's process-info hook.
 *
 * tap records every descendant node process for coverage: it puts its hook into NODE_OPTIONS and
 * into every spawn (process-on-spawn). On Node 20 the hook is a module loader on a thread of its
 * own, which doubles a process's module loading (a runner starts ~1 s later) and writes a JSON file
 * at exit: ~3–4 s per test file that starts a daemon, about 5 minutes of the suite. Coverage is
 * off (package.json), so nothing reads what it records. Where tap's internals differ (another
 * version), this does nothing and the suite is only slower.
 */
const state = globalThis[Symbol.for("process-on-spawn@*:singletonId")];
if (state && Array.isArray(state.listeners)) state.listeners.length = 0;
if (process.env.NODE_OPTIONS?.includes("@tapjs/processinfo")) delete process.env.NODE_OPTIONS;
