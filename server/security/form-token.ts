import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LOGIN_PATH } from '../../shared/endpoints.js';
import { lastListEntry } from '../http/client-address.js';
import type { Config } from '../ops/config.js';
import { serializeCookie } from '../http/cookies.js';

/**
 * Cross-site request forgery defences of the browser sign-in page
 * (`--login-page`): signed form tokens and the Origin check.
 *
 *   token     = payload "." signature
 *   payload   = base64url(nonce (16 random bytes) || issued-at (uint64 BE, seconds))
 *   signature = base64url(HMAC-SHA256(key, purpose ":" binding "\n" payload))
 *
 * The sign-in form's token is bound to the browser by double submit: its
 * nonce is also in the LOGIN_FORM cookie (SameSite=Strict, so a cross-site
 * POST does not carry it), and the two must match; an attacker can get a
 * token of their own, but cannot make the victim's browser hold its nonce.
 * The sign-out form's token is bound to the session id instead, which only
 * the holder of the (HttpOnly) session cookie knows. The signature keeps
 * both unforgeable and carries the issue time, so a form is good for
 * FORM_TOKEN_TTL seconds. The purpose is in the signed text, so a sign-in
 * token does not sign out, and the prefix differs from the session token's
 * ("USER_TOKEN="), so neither kind of token can pass for the other.
 * The keys are the session keys: no new secret to keep.
 */
export type FormPurpose = 'login-form' | 'logout-form';

/** Seconds a form stays usable after it was served. */
export const FORM_TOKEN_TTL = 600;
/** The cookie holding the sign-in form's nonce. */
export const LOGIN_FORM_COOKIE = 'LOGIN_FORM';
/** The form field that carries the token. */
export const FORM_TOKEN_FIELD = 'csrf';

const NONCE_BYTES = 16;
const PAYLOAD_BYTES = NONCE_BYTES + 8;
// 24 bytes are exactly 32 base64url characters; 32 bytes of HMAC are 43.
const TOKEN = /^([A-Za-z0-9_-]{32})\.([A-Za-z0-9_-]{43})$/;
const NONCE = /^[A-Za-z0-9_-]{22}$/;

/** A fresh random nonce, as the LOGIN_FORM cookie carries it. */
export function newFormNonce(): string {
  return randomBytes(NONCE_BYTES).toString('base64url');
}

/** True for a value that can be a nonce made by newFormNonce. */
export function isFormNonce(value: string): boolean {
  return NONCE.test(value) && Buffer.from(value, 'base64url').toString('base64url') === value;
}

function sign(purpose: FormPurpose, binding: string, payload: string, key: Buffer): string {
  return createHmac('sha256', key).update(`${purpose}:${binding}\n${payload}`).digest('base64url');
}

/** A token for a form served at `issuedAt` (seconds), signed with `key`. */
export function signFormToken(purpose: FormPurpose, binding: string, nonce: string, issuedAt: number, key: Buffer): string {
  const bytes = Buffer.alloc(PAYLOAD_BYTES);
  Buffer.from(nonce, 'base64url').copy(bytes, 0, 0, NONCE_BYTES);
  bytes.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(issuedAt))), NONCE_BYTES);
  const payload = bytes.toString('base64url');
  return `${payload}.${sign(purpose, binding, payload, key)}`;
}

/**
 * The nonce of a token that verifies with one of `keys` for this purpose and
 * binding and was issued at most FORM_TOKEN_TTL seconds before `nowSeconds`
 * (and not after it); undefined for anything else. The signature is
 * compared as its canonical text, in constant time, as session tokens are.
 */
export function verifyFormToken(token: string, purpose: FormPurpose, binding: string, keys: readonly Buffer[], nowSeconds: number): string | undefined {
  const match = TOKEN.exec(token);
  if (match === null) return undefined;
  const payload = match[1]!;
  const given = Buffer.from(match[2]!, 'latin1');
  let verified = false;
  for (const key of keys) {
    if (timingSafeEqual(given, Buffer.from(sign(purpose, binding, payload, key), 'latin1'))) verified = true;
  }
  if (!verified) return undefined;
  const bytes = Buffer.from(payload, 'base64url');
  const issuedAt = Number(bytes.readBigUInt64BE(NONCE_BYTES));
  if (issuedAt > nowSeconds || nowSeconds - issuedAt > FORM_TOKEN_TTL) return undefined;
  return bytes.subarray(0, NONCE_BYTES).toString('base64url');
}

/** True when two nonces are equal, compared in constant time. */
export function sameNonce(a: string, b: string): boolean {
  const x = Buffer.from(a, 'latin1');
  const y = Buffer.from(b, 'latin1');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The Set-Cookie value of the sign-in form's nonce: only sent back to
 * /login, never on a cross-site request (SameSite=Strict), gone with the
 * form's freshness. `maxAge` 0 clears it.
 */
export function formNonceCookie(nonce: string, maxAge: number, secure: boolean): string {
  return serializeCookie(LOGIN_FORM_COOKIE, nonce, { maxAge, secure, path: LOGIN_PATH, sameSite: 'Strict' });
}

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

export type OriginCheck = 'same' | 'absent' | 'cross';

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

const FORM_TYPES = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

function mediaType(header: string | undefined): string {
  if (header === undefined) return '';
  const semicolon = header.indexOf(';');
  return (semicolon === -1 ? header : header.slice(0, semicolon)).trim().toLowerCase();
}

/** True for `application/x-www-form-urlencoded`, the encoding of the page's forms. */
export function isUrlEncodedForm(header: string | undefined): boolean {
  return mediaType(header) === FORM_TYPES[0];
}

/** True for any of the three encodings an HTML form can send (HTML "form submission"), so a cross-site page can. */
export function isFormEncoding(header: string | undefined): boolean {
  return FORM_TYPES.includes(mediaType(header));
}

const utf8 = new TextDecoder('utf-8');

/** The fields of an urlencoded body, read as UTF-8 (the page's encoding); the first of repeated names wins. */
export function parseForm(raw: Buffer): URLSearchParams {
  return new URLSearchParams(utf8.decode(raw));
}
