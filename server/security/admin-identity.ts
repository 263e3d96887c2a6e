import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The account id of the built-in admin while its password is the generated
 * one or USERS_ADMIN_PASSWORD. Sessions carry their account's id, so a new
 * id ends every session of the old password: the id is kept with a check
 * of the password it belongs to (an HMAC under a random key of its own),
 * and a start with another password makes a new one. The record is kept
 * where the signing secret is (the data directory, or the database's
 * settings), whose readers could sign sessions anyway.
 */
interface AdminIdentity {
  readonly id: string;
  /** What to keep for the next start: unchanged when the password is. */
  readonly record: string;
}

interface IdentityRecord {
  id: string;
  key: string;
  check: string;
}

/** The identity of `password`: the stored one when it was made for the same password, else a new one. */
export function adminIdentity(password: string, stored: string | undefined): AdminIdentity {
  const kept = parseIdentity(stored);
  if (kept !== undefined && sameCheck(checkOf(kept.key, password), kept.check)) return { id: kept.id, record: stored! };
  const key = randomBytes(32).toString('base64url');
  const record: IdentityRecord = { id: randomBytes(9).toString('base64url'), key, check: checkOf(key, password) };
  return { id: record.id, record: JSON.stringify(record) };
}

function checkOf(key: string, password: string): string {
  return createHmac('sha256', key).update(password, 'utf8').digest('base64url');
}

function sameCheck(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A kept record, or undefined for none or one that is damaged (a new identity replaces it). */
function parseIdentity(text: string | undefined): IdentityRecord | undefined {
  if (text === undefined) return undefined;
  try {
    const r = JSON.parse(text) as Partial<IdentityRecord>;
    return typeof r.id === 'string' && typeof r.key === 'string' && typeof r.check === 'string'
      ? (r as IdentityRecord)
      : undefined;
  } catch {
    return undefined;
  }
}
