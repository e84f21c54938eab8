/**
 * The dispatcher every registry request goes through: direct connections checked by the address
 * policy, or the proxy of HTTPS_PROXY/HTTP_PROXY after checking the target's name.
 */
import type tls from "node:tls";
import { Agent, EnvHttpProxyAgent, type Dispatcher } from "undici";
import type { AddressPolicy } from "./address.js";
import { REGISTRY_DEFAULTS } from "./settings.js";
import { unpaused } from "./unpaused.js";

export interface DispatcherOptions {
  /** Checks (and pins) every address connected to, and every proxied target's name. */
  policy: AddressPolicy;
  /** Trust for TLS besides the default store (SERVICE_REGISTRY_CA), for the registry's connections, proxied or not. */
  secureContext?: tls.SecureContext;
  /** Where HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or their lower-case forms) are read; default the process's. */
  env?: NodeJS.ProcessEnv;
}

/** The proxy variables of `env`, lower-case first as curl and Go read them; undefined when none is set. */
export function proxyEnv(env: NodeJS.ProcessEnv = process.env): { httpProxy?: string; httpsProxy?: string; noProxy: string } | undefined {
  const get = (name: string) => (env[name.toLowerCase()] ?? env[name]) || undefined;
  const httpProxy = get("HTTP_PROXY");
  const httpsProxy = get("HTTPS_PROXY");
  if (!httpProxy && !httpsProxy) return undefined;
  return { httpProxy, httpsProxy, noProxy: get("NO_PROXY") ?? "" };
}

/**
 * The dispatcher for one registry client: a direct agent whose connections are checked by the
 * address policy, or, when HTTPS_PROXY/HTTP_PROXY is set, one that sends each request through the
 * proxy for its scheme (hosts in NO_PROXY still go direct) after checking the target's name
 * ({@link AddressPolicy.checkName}). Plain-http registries are asked through the proxy with
 * absolute URLs, https ones through a CONNECT tunnel. Every response goes through {@link unpaused}.
 */
export function registryDispatcher(options: DispatcherOptions): Dispatcher {
  const { policy, secureContext } = options;
  const trust = secureContext ? { secureContext } : {};
  const agentOptions = {
    bodyTimeout: REGISTRY_DEFAULTS.bodyTimeoutMs,
    headersTimeout: REGISTRY_DEFAULTS.headersTimeoutMs,
    connect: { timeout: REGISTRY_DEFAULTS.connectTimeoutMs, lookup: policy.lookup, ...trust },
  };
  const proxy = proxyEnv(options.env);
  if (!proxy) return new Agent(agentOptions).compose(unpaused);
  policy.proxied = true;
  const checked: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
    const fail = (err: unknown) => failBeforeStart(handler, err instanceof Error ? err : new Error(String(err)));
    policy.checkName(new URL(String(opts.origin)).hostname).then(() => {
      try {
        dispatch(opts, handler);
      } catch (err) {
        fail(err); // a closed dispatcher: the request's failure, never an unhandled rejection
      }
    }, fail);
    return true;
  };
  // Through a tunnel, TLS to the registry is set up by `requestTls` (`connect` reaches the proxy).
  return new EnvHttpProxyAgent({ ...agentOptions, ...proxy, proxyTunnel: false, requestTls: trust }).compose(unpaused, checked);
}

/** Ends a request that never reached the network with `err`, in whichever handler interface it speaks. */
function failBeforeStart(handler: Dispatcher.DispatchHandler, err: Error): void {
  const controller = { abort: () => undefined, pause: () => undefined, resume: () => undefined, aborted: true, paused: false, reason: err };
  const legacy = handler as { onError?: (err: Error) => void };
  if (handler.onResponseError) handler.onResponseError(controller as Dispatcher.DispatchController, err);
  else legacy.onError?.(err);
}
