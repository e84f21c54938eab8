/**
 * Preloaded into a runner child by test/unit/runner-output.test.ts (`--import`): every output
 * message the child writes (`chunk`, `thinking`, or a `batch` of them) gets a `decoding` field, true
 * when a decode of the context was running at the moment of the write. An internal hook (a Proxy on
 * node-llama-cpp's native context, as test/helpers/batches.ts), plain JavaScript because the child
 * runs without the tests' TypeScript loader. node-llama-cpp forks processes of its own that inherit
 * the preload (to test its binary): only the runner's entry is traced.
 */
if (process.argv[1]?.endsWith("child.js")) trace((await import("node-llama-cpp")).LlamaContext);

function trace(LlamaContext) {
  let inFlight = 0;
  const getSequence = LlamaContext.prototype.getSequence;
  LlamaContext.prototype.getSequence = function (...args) {
    if (!this.__traced) {
      this.__traced = true;
      const native = this._ctx;
      this._ctx = new Proxy(native, {
        get(target, key) {
          const value = target[key];
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
    return send(output ? { ...msg, decoding: inFlight > 0 } : msg, ...rest);
  };
}
