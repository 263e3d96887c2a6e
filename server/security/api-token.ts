/**
 * API tokens for scripts and scrapers (docs/api.md "API tokens"): sent as
 * `Authorization: Bearer ust_<id>.<secret>`. The id (16 hex digits) is
 * public: it names the token in listings and revocations. The secret is 32
 * random bytes, so the token is stored as its SHA-256 alone: a fast hash is
 * enough for 256 bits of randomness (no guess can be tried offline faster
 * than the key space), unlike a password, which needs scrypt. The prefix
 * lets secret scanners and people recognise one.
 */
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

const TOKEN_PREFIX = 'ust_';
const TOKEN = /^ust_([0-9a-f]{16})\.[A-Za-z0-9_-]{43}$/;

interface MintedToken {
  readonly id: string;
  /** Shown once, to its creator; never stored. */
  readonly token: string;
  readonly hash: string;
}

export function mintApiToken(): MintedToken {
  const id = randomBytes(8).toString('hex');
  const token = `${TOKEN_PREFIX}${id}.${randomBytes(32).toString('base64url')}`;
  return { id, token, hash: tokenHash(token) };
}

/** SHA-256 of the whole token, hex: what a store keeps. */
export function tokenHash(token: string): string {
  return hash('sha256', token, 'hex');
}

/** The id of a string shaped like a token; undefined for anything else. */
export function apiTokenId(token: string): string | undefined {
  return TOKEN.exec(token)?.[1];
}

/** Whether `token` is the one `hash` was made from, compared in constant time. */
export function tokenMatches(token: string, hash: string): boolean {
  const given = Buffer.from(tokenHash(token), 'hex');
  const kept = Buffer.from(hash, 'hex');
  return given.length === kept.length && timingSafeEqual(given, kept);
}

/**
 * The credential of `Authorization: Bearer ...` (RFC 6750 section 2.1: the
 * scheme is case-insensitive, the b64token is not); undefined for no field or
 * another scheme, '' for a Bearer field without a usable token.
 */
export function parseBearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^bearer(?: +(.*))?$/i.exec(header.trim());
  if (match === null) return undefined;
  const credential = match[1]?.trim() ?? '';
  return /^[A-Za-z0-9._~+/-]+=*$/.test(credential) ? credential : '';
}
