import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sign, verifySignature } from './hmac.js';

/**
 * The signed form tokens of the browser sign-in page (`--login-page`), its
 * defence against cross-site request forgery besides the Origin check
 * (http/origin.ts).
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
type FormPurpose = 'login-form' | 'logout-form';

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

/** The signed text: the purpose and binding first, so a token of one kind never passes for another. */
function signedText(purpose: FormPurpose, binding: string, payload: string): string {
  return `${purpose}:${binding}\n${payload}`;
}

/** A token for a form served at `issuedAt` (seconds), signed with `key`. */
export function signFormToken(
  purpose: FormPurpose,
  binding: string,
  nonce: string,
  issuedAt: number,
  key: Buffer,
): string {
  const bytes = Buffer.alloc(PAYLOAD_BYTES);
  Buffer.from(nonce, 'base64url').copy(bytes, 0, 0, NONCE_BYTES);
  bytes.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(issuedAt))), NONCE_BYTES);
  const payload = bytes.toString('base64url');
  return `${payload}.${sign(signedText(purpose, binding, payload), key)}`;
}

/**
 * The nonce of a token that verifies with one of `keys` for this purpose and
 * binding and was issued at most FORM_TOKEN_TTL seconds before `nowSeconds`
 * (and not after it); undefined for anything else. The signature is
 * compared as its canonical text, in constant time, as session tokens are.
 */
export function verifyFormToken(
  token: string,
  purpose: FormPurpose,
  binding: string,
  keys: readonly Buffer[],
  nowSeconds: number,
): string | undefined {
  const match = TOKEN.exec(token);
  if (match === null) return undefined;
  const payload = match[1]!;
  if (verifySignature(match[2]!, signedText(purpose, binding, payload), keys) === -1) return undefined;
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
