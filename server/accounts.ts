import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Accounts that may log in. A role decides what a session may do: `admin`
 * everything, `reader` reads only. Sessions name their account, and the role
 * is looked up on every request, so a changed or removed account takes effect
 * at once.
 */
export type Role = 'admin' | 'reader';

export interface Account {
  readonly name: string;
  readonly role: Role;
}

export interface PasswordHash {
  salt: Buffer;
  hash: Buffer;
}

interface StoredAccount extends Account {
  readonly password: PasswordHash;
}

const KEY_LENGTH = 32;
// N=2^15, r=8, p=1: about 32 MiB and tens of milliseconds per check.
const SCRYPT_OPTIONS: ScryptOptions = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

function scryptAsync(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, SCRYPT_OPTIONS, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

export async function hashPassword(password: string): Promise<PasswordHash> {
  const salt = randomBytes(16);
  return { salt, hash: await scryptAsync(password, salt) };
}

export class Accounts {
  private readonly accounts = new Map<string, StoredAccount>();
  // Checked against when the account does not exist, so that a login for an
  // unknown name costs the same scrypt work as one for a real name.
  private readonly decoy: PasswordHash = { salt: randomBytes(16), hash: randomBytes(KEY_LENGTH) };

  add(name: string, role: Role, password: PasswordHash): void {
    this.accounts.set(name, { name, role, password });
  }

  get(name: string): Account | undefined {
    return this.accounts.get(name);
  }

  /** The account when the password is right; undefined otherwise, in the same time either way. */
  async verify(name: string, password: string): Promise<Account | undefined> {
    const account = this.accounts.get(name);
    const stored = account?.password ?? this.decoy;
    const candidate = await scryptAsync(password, stored.salt);
    const equal = timingSafeEqual(candidate, stored.hash);
    return equal && account !== undefined ? account : undefined;
  }
}

/**
 * Parses `Authorization: Basic ...` (RFC 7617). The user-id may not contain
 * a colon; the password may. Returns undefined for any other scheme or a
 * malformed value.
 */
export function parseBasicAuth(header: string | undefined): { user: string; password: string } | undefined {
  if (header === undefined) return undefined;
  const match = /^basic +([A-Za-z0-9+/]+=*) *$/i.exec(header);
  if (match === null) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return undefined;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
