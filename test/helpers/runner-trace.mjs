/**
 * Preloaded into a runner child by test/helpers/traced-runner.ts (`--import`): every output message
 * the child writes (`chunk`, `thinking`, or a `batch` of them) gets a `decoding` field, true when a
 * decode of the context was running at the moment of the write; every `done` message gets `sampled`:
 * how many tokens the context sampled so far, and how many of those samplings were started while a
 * decode was running. An internal hook (a Proxy on node-llama-cpp's native context, as
 * test/helpers/batches.ts), plain JavaScript because the child runs without the tests' TypeScript
 * loader. node-llama-cpp forks processes of its own that inherit the preload (to test its binary):
 * only the runner's entry is traced.
 */
if (process.argv[1]?.endsWith("child/entry.js")) trace((await import("node-llama-cpp")).LlamaContext);

function trace(LlamaContext) {
  let inFlight = 0;
  const sampled = { total: 0, duringDecode: 0 };
  const getSequence = LlamaContext.prototype.getSequence;
  LlamaContext.prototype.getSequence = function (...args) {
    if (!this.__traced) {
      this.__traced = true;
      const native = this._ctx;
      this._ctx = new Proxy(native, {
        get(target, key) {
          const value = target[key];
          if (key === "sampleToken")
            return (...a) => {
              sampled.total++;
              if (inFlight > 0) sampled.duringDecode++;
              return value.apply(target, a);
            };
          if (key !== "decodeBatch") return typeof value === "function" ? value.bind(target) : value;
          return async (...a) => {
            inFlight++;
            try {
              return await value.apply(target, a);
            } finally {
              inFlight--;
            }
          };
        },
      });
    }
    return getSequence.apply(this, args);
  };

  const send = process.send.bind(process);
  process.send = (msg, ...rest) => {
    const output = msg.type === "chunk" || msg.type === "thinking" || msg.type === "batch";
    if (msg.type === "done") return send({ ...msg, sampled: { ...sampled } }, ...rest);
    return send(output ? { ...msg, decoding: inFlight > 0 } : msg, ...rest);
  };
}
