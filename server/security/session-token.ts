import { randomBytes } from 'node:crypto';
import { SESSION_COOKIE } from '../../shared/endpoints.js';
import { sign, verifySignature } from './hmac.js';

/**
 * Signed session tokens: the value of the USER_TOKEN cookie.
 *
 *   token     = payload "." signature
 *   payload   = base64url(JSON {a: account, s: session id, i: issued-at, e: expiry[, u: account id]})
 *   signature = base64url(HMAC-SHA256(key, "USER_TOKEN=" payload))
 *
 * The cookie name is part of the signed text, so a token cannot be replayed
 * under another cookie. The expiry is inside the signed payload, so a client
 * cannot stretch a session by editing the cookie's Max-Age.
 */
export interface SessionPayload {
  account: string;
  /**
   * The account's random id, so that removing an account and adding the name
   * again does not revive its sessions. Absent for the built-in admin, whose
   * tokens keep the shape they had before accounts existed.
   */
  accountId?: string;
  sessionId: string;
  /** Seconds since the epoch. */
  issuedAt: number;
  /** Seconds since the epoch. */
  expiresAt: number;
}

export interface VerifiedSession {
  payload: SessionPayload;
  /** Index of the key that verified it; above 0 means "re-issue with the first key". */
  keyIndex: number;
}

const SIGNATURE_LENGTH = 43; // base64url of 32 bytes, unpadded
/** Browsers keep cookies up to 4096 bytes, name and value together. */
export const MAX_TOKEN_LENGTH = 4096 - SESSION_COOKIE.length - 1;

/** The signed text: the cookie name is part of it, so a token cannot pass under another name. */
function signedText(payload: string): string {
  return `${SESSION_COOKIE}=${payload}`;
}

export function newSessionId(): string {
  return randomBytes(16).toString('base64url');
}

export function signSession(session: SessionPayload, key: Buffer): string {
  const fields = {
    a: session.account,
    s: session.sessionId,
    i: session.issuedAt,
    e: session.expiresAt,
    ...(session.accountId ? { u: session.accountId } : {}),
  };
  const payload = Buffer.from(JSON.stringify(fields)).toString('base64url');
  return `${payload}.${sign(signedText(payload), key)}`;
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Verifies a token against every key (hmac.ts) and checks its expiry.
 * Returns undefined for anything that does not verify.
 */
export function verifySession(token: string, keys: readonly Buffer[], nowSeconds: number): VerifiedSession | undefined {
  if (token.length > MAX_TOKEN_LENGTH) return undefined;
  const dot = token.lastIndexOf('.');
  if (dot <= 0 || token.length - dot - 1 !== SIGNATURE_LENGTH) return undefined;
  const payload = token.slice(0, dot);
  const keyIndex = verifySignature(token.slice(dot + 1), signedText(payload), keys);
  if (keyIndex === -1 || !BASE64URL.test(payload)) return undefined;
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof fields !== 'object' || fields === null) return undefined;
  const { a, s, i, e, u } = fields as Record<string, unknown>;
  if (typeof a !== 'string' || typeof s !== 'string' || typeof i !== 'number' || typeof e !== 'number')
    return undefined;
  if (u !== undefined && typeof u !== 'string') return undefined;
  if (e <= nowSeconds) return undefined;
  const session: SessionPayload = { account: a, sessionId: s, issuedAt: i, expiresAt: e };
  if (u !== undefined && u !== '') session.accountId = u;
  return { payload: session, keyIndex };
}
