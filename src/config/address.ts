/**
 * Listen addresses in every form the daemon accepts (the variable, a client's host), and the URL a
 * client connects to. Pure: the CLI and the API client use them too.
 */
import { ConfigError } from "./values.js";

export interface ListenAddress {
  /** Host to bind; `""` means all interfaces. IPv6 literals are stored without brackets. */
  host: string;
  port: number;
}

/**
 * Parses a listen address in any form lmd accepts: `host:port`, `host`, `:port`,
 * `[v6]:port`, a bare IPv6 literal, and any of these behind `http://` or `https://`.
 */
export function parseListenAddress(value: string, variable = "SERVICE_HOST", defaultPort = 11434): ListenAddress {
  let rest = value.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(rest);
  if (scheme) {
    if (!/^https?$/i.test(scheme[1] ?? "")) throw new ConfigError(variable, `unsupported scheme '${scheme[1]}' in '${value}'`);
    rest = rest.slice(scheme[0].length).replace(/\/+$/, "");
  }
  if (rest.includes("/")) throw new ConfigError(variable, `'${value}' is not a <host>:<port> address`);
  let host: string;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]*)\](?::(.*))?$/.exec(rest);
  if (bracketed) {
    host = bracketed[1] ?? "";
    portText = bracketed[2];
    if (!isIPv6(host)) throw new ConfigError(variable, `'${host}' is not an IPv6 address`);
  } else if ((rest.match(/:/g) ?? []).length > 1) {
    host = rest; // a bare IPv6 literal has no port
    if (!isIPv6(host)) throw new ConfigError(variable, `'${value}' is not a valid address`);
  } else {
    const i = rest.indexOf(":");
    host = i < 0 ? rest : rest.slice(0, i);
    portText = i < 0 ? undefined : rest.slice(i + 1);
    if (host !== "" && !/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/i.test(host)) throw new ConfigError(variable, `'${host}' is not a valid host name`);
  }
  let port = defaultPort;
  if (portText !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535) throw new ConfigError(variable, `port '${portText}' must be an integer between 0 and 65535`);
    port = Number(portText);
  }
  return { host: host.toLowerCase(), port };
}

/** True when `host` names the loopback interface (the DNS-rebinding guards apply only then). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || /^127(\.[0-9]{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}

/** The address a client should connect to for a listen address (0.0.0.0 → 127.0.0.1, :: → ::1). */
export function clientUrl(listen: ListenAddress): string {
  let host = listen.host;
  if (host === "" || host === "0.0.0.0") host = "127.0.0.1";
  if (host === "::") host = "::1";
  return `http://${host.includes(":") ? `[${host}]` : host}:${listen.port}`;
}

function isIPv6(host: string): boolean {
  return /^[0-9a-f:.]+$/i.test(host) && host.includes(":") && host.split("::").length <= 2;
}
