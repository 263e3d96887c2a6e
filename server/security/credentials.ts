import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Accounts that may log in. A role decides what a session may do: `admin`
 * everything, `reader` reads only. Sessions name their account, and the role
 * is looked up on every request, so a changed or removed account takes effect
 * at once.
 */
export type Role = 'admin' | 'reader';

export const ROLES: readonly Role[] = ['admin', 'reader'];

export interface Account {
  readonly name: string;
  readonly role: Role;
  /**
   * Random per account ('' for the built-in admin). Sessions carry it, so a
   * session of a removed account does not come back when the name is added
   * again.
   */
  readonly id: string;
  /** RFC 3339 time the account was added; undefined for the built-in admin until its password is changed. */
  readonly created?: string;
}

/** scrypt's cost parameters (RFC 7914), kept with each hash so they can change later. */
export interface ScryptParams {
  readonly N: number;
  readonly r: number;
  readonly p: number;
}

interface PasswordHash {
  salt: Buffer;
  hash: Buffer;
  params: ScryptParams;
}

export interface StoredAccount extends Account {
  readonly password: PasswordHash;
}

/** Derives `length` bytes from a password; tests inject a counting one. */
export type ScryptFunction = (password: string, salt: Buffer, params: ScryptParams, length: number) => Promise<Buffer>;

const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
/** `--password-cost`: log2 of scrypt's N. 15 (N=2^15, r=8, p=1) is 32 MiB and tens of milliseconds per check. */
const DEFAULT_PASSWORD_COST = 15;
export const DEFAULT_SCRYPT_PARAMS: ScryptParams = scryptParams(DEFAULT_PASSWORD_COST);

/** The scrypt parameters of a `--password-cost`. */
function scryptParams(cost: number): ScryptParams {
  return Object.freeze({ N: 2 ** cost, r: 8, p: 1 });
}

interface HashOptions {
  /** log2 of scrypt's N for new hashes (`--password-cost`); DEFAULT_PASSWORD_COST when absent. */
  cost?: number;
  /** Explicit parameters for new hashes; they win over `cost`. */
  params?: ScryptParams;
  scrypt?: ScryptFunction;
}

/** node:crypto's scrypt on the thread pool, with room for the memory the parameters need (128 * N * r bytes). */
const scryptHash: ScryptFunction = (password, salt, params, length) =>
  new Promise((resolve, reject) => {
    const maxmem = Math.max(32 * 1024 * 1024, 2 * 128 * params.N * params.r);
    scrypt(password, salt, length, { N: params.N, r: params.r, p: params.p, maxmem }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });

/** A new salted scrypt hash of `password`. */
export async function hashPassword(password: string, options: HashOptions = {}): Promise<PasswordHash> {
  const params = options.params ?? (options.cost === undefined ? DEFAULT_SCRYPT_PARAMS : scryptParams(options.cost));
  const salt = randomBytes(SALT_LENGTH);
  return { salt, hash: await (options.scrypt ?? scryptHash)(password, salt, params, KEY_LENGTH), params };
}

export class Accounts {
  /** Built-in accounts (admin) followed by those of the accounts file; one Map, so a session check is one lookup. */
  private accounts = new Map<string, StoredAccount>();
  private readonly builtIn = new Map<string, StoredAccount>();
  private readonly scrypt: ScryptFunction;
  /** The parameters of a new account's hash (`--password-cost`). */
  private readonly newParams: ScryptParams;
  // Checked against when the account does not exist, so that a login for an
  // unknown name costs the same scrypt work as one for a real name: the
  // parameters most stored accounts have (see `decoyParams`).
  private decoy: PasswordHash;

  constructor(options: HashOptions = {}) {
    this.scrypt = options.scrypt ?? scryptHash;
    this.newParams =
      options.params ?? (options.cost === undefined ? DEFAULT_SCRYPT_PARAMS : scryptParams(options.cost));
    this.decoy = { salt: randomBytes(SALT_LENGTH), hash: randomBytes(KEY_LENGTH), params: this.newParams };
  }

  /** Adds a built-in account: it survives every `replaceStored`. */
  add(name: string, role: Role, password: PasswordHash, id = ''): void {
    const account = { name, role, password, id };
    this.builtIn.set(name, account);
    this.accounts.set(name, account);
  }

  /**
   * Replaces the stored accounts (the accounts file's, the database's). A
   * stored record of a built-in name (the admin's, once its password was
   * changed) takes the built-in account's place; without one, the built-in
   * account stays.
   */
  replaceStored(stored: Iterable<StoredAccount>): void {
    const next = new Map(this.builtIn);
    for (const account of stored) next.set(account.name, account);
    this.accounts = next;
    this.decoy = {
      ...this.decoy,
      params: decoyParams(
        [...next.values()].filter((a) => !this.builtIn.has(a.name)),
        this.newParams,
      ),
    };
  }

  get(name: string): Account | undefined {
    return this.accounts.get(name);
  }

  /**
   * The account when the password is right; undefined otherwise. scrypt runs
   * exactly once either way, against the decoy for an unknown name.
   */
  async verify(name: string, password: string): Promise<Account | undefined> {
    const account = this.accounts.get(name);
    const stored = account?.password ?? this.decoy;
    const candidate = await this.scrypt(password, stored.salt, stored.params, stored.hash.length);
    const equal = timingSafeEqual(candidate, stored.hash);
    return equal && account !== undefined ? account : undefined;
  }
}

/**
 * The parameters a login for an unknown name is checked with: those most of
 * `accounts` are stored with, the higher cost on a tie, so the answer takes
 * as long as for most real names even when their hashes were made under
 * another `--password-cost`; `fallback` when there are none. The built-in
 * admin is left out: its name is known to exist anyway.
 */
function decoyParams(accounts: readonly StoredAccount[], fallback: ScryptParams): ScryptParams {
  const counts = new Map<string, { params: ScryptParams; count: number }>();
  for (const { password } of accounts) {
    const { N, r, p } = password.params;
    const entry = counts.get(`${N},${r},${p}`) ?? { params: password.params, count: 0 };
    entry.count++;
    counts.set(`${N},${r},${p}`, entry);
  }
  let best: { params: ScryptParams; count: number } | undefined;
  for (const entry of counts.values()) {
    if (
      best === undefined ||
      entry.count > best.count ||
      (entry.count === best.count && scryptWork(entry.params) > scryptWork(best.params))
    )
      best = entry;
  }
  return best?.params ?? fallback;
}

/** What one check costs, in scrypt's terms (RFC 7914): N * r * p. */
function scryptWork(params: ScryptParams): number {
  return params.N * params.r * params.p;
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
