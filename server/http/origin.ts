import type { IncomingMessage } from 'node:http';
import type { Config } from '../ops/config.js';
import { lastListEntry } from './client-address.js';

/**
 * The scheme clients use to reach the server: https with --cookie-secure
 * (operations.md: set it whenever clients come over TLS); else, with
 * --trust-proxy, the last X-Forwarded-Proto entry, appended by the proxy
 * in front; else http.
 */
function scheme(req: IncomingMessage, config: Pick<Config, 'cookieSecure' | 'trustProxy'>): string {
  if (config.cookieSecure) return 'https';
  if (config.trustProxy) {
    const last = lastListEntry(req.headers['x-forwarded-proto']).toLowerCase();
    if (last === 'https' || last === 'http') return last;
  }
  return 'http';
}

// An origin as RFC 6454 section 6.1 serializes it, lower-cased, without the scheme's default port.
function normalizeOrigin(scheme: string, host: string): string {
  const lower = host.toLowerCase();
  const defaultPort = scheme === 'https' ? ':443' : ':80';
  return `${scheme}://${lower.endsWith(defaultPort) ? lower.slice(0, -defaultPort.length) : lower}`;
}

type OriginCheck = 'same' | 'absent' | 'cross';

/**
 * Compares the Origin field (RFC 6454 section 7) with the server's own
 * origin: the scheme above and the Host field. Browsers send Origin on every
 * POST; `null` (a sandboxed or privacy-sensitive context) and several
 * values count as cross-origin. Only requests without Origin (curl, old
 * browsers) are 'absent': for them the signed token is the defence.
 */
export function checkOrigin(req: IncomingMessage, config: Pick<Config, 'cookieSecure' | 'trustProxy'>): OriginCheck {
  const origin = req.headers.origin;
  if (origin === undefined) return 'absent';
  const host = req.headers.host;
  if (host === undefined || host === '') return 'cross';
  const match = /^(https?):\/\/([^/?#\s,]+)$/i.exec(origin.trim());
  if (match === null) return 'cross';
  const own = scheme(req, config);
  return normalizeOrigin(match[1]!.toLowerCase(), match[2]!) === normalizeOrigin(own, host) ? 'same' : 'cross';
}

/**
 * Whether a request comes from a page of another site: the browser says
 * so (`Sec-Fetch-Site: cross-site`, Fetch Metadata), or its Origin is not
 * the server's own (a sibling subdomain included). A request with neither
 * (curl, a script) is not.
 */
export function isCrossSite(req: IncomingMessage, config: Pick<Config, 'cookieSecure' | 'trustProxy'>): boolean {
  return req.headers['sec-fetch-site'] === 'cross-site' || checkOrigin(req, config) === 'cross';
}
