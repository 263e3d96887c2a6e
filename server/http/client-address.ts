import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import type { Config } from '../ops/config.js';
import { unmapIpv4 } from '../security/rate-limit.js';

/**
 * The address of the client a request comes from. Without `--trust-proxy`
 * it is the peer of the socket. With it, it is the LAST entry of
 * `X-Forwarded-For`: the one the proxy directly in front of the server
 * appended; every entry before it was written by the client or by hops the
 * server cannot vouch for, so they are never read. `Forwarded` (RFC 7239)
 * is not read. A missing or unparsable last entry falls back to the socket
 * peer (the proxy), which is the conservative choice for rate limiting.
 * IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) are given as IPv4.
 */
export function clientAddress(req: IncomingMessage, config: Pick<Config, 'trustProxy'>): string {
  if (config.trustProxy) {
    const address = lastForwardedAddress(req.headers['x-forwarded-for']);
    if (address !== undefined) return unmapIpv4(address);
  }
  return unmapIpv4(req.socket.remoteAddress ?? 'unknown');
}

/**
 * The last element of a comma-separated list field, trimmed; "" when the
 * field is absent. node:http joins repeated lines of these fields with
 * ", ", so the last entry of the last line is the last element: the one
 * the proxy in front appended.
 */
export function lastListEntry(field: string | string[] | undefined): string {
  if (field === undefined) return '';
  const joined = Array.isArray(field) ? field.join(',') : field;
  return joined.slice(joined.lastIndexOf(',') + 1).trim();
}

/**
 * The last element of an X-Forwarded-For field (see `lastListEntry`) as a
 * bare IP address, or undefined. Some proxies add a port (`192.0.2.1:4711`,
 * `[2001:db8::1]:4711`); it is dropped.
 */
export function lastForwardedAddress(field: string | string[] | undefined): string | undefined {
  const entry = lastListEntry(field);
  if (isIP(entry) !== 0) return entry;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(entry);
  if (bracketed !== null && isIP(bracketed[1]!) === 6) return bracketed[1]!;
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(entry);
  if (withPort !== null && isIP(withPort[1]!) === 4) return withPort[1]!;
  return undefined;
}
