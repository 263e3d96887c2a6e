/**
 * HMAC-SHA256 signatures, the one place they are computed and checked: the
 * session token and the sign-in page's form tokens both sign with it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** HMAC-SHA256 of `text` under `key`, as unpadded base64url (43 characters). */
export function sign(text: string, key: Buffer): string {
  return createHmac('sha256', key).update(text).digest('base64url');
}

/**
 * The index of the first key under which `signature` signs `text`, or -1.
 * The signature is compared as its canonical base64url text, so two
 * encodings of the same bytes cannot both pass, and in constant time
 * (timingSafeEqual), so the time taken tells an attacker nothing about how
 * many leading characters were right.
 */
export function verifySignature(signature: string, text: string, keys: readonly Buffer[]): number {
  const given = Buffer.from(signature, 'latin1');
  for (let i = 0; i < keys.length; i++) {
    const expected = Buffer.from(sign(text, keys[i]!), 'latin1');
    if (given.length === expected.length && timingSafeEqual(given, expected)) return i;
  }
  return -1;
}
