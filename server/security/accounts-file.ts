/**
 * `<data>/accounts`: the accounts, written by `users-server accounts` and
 * read by the server; the built-in admin is there once `accounts passwd
 * admin` gave it a password of its own. JSON, one account a line:
 *
 *  {"format":1,"accounts":[
 *  {"name":"bob","role":"reader","id":"...","created":"...","scrypt":{"N":32768,"r":8,"p":1,"salt":"...","hash":"..."}}
 *  ]}
 *
 * Mode 0600, replaced atomically (temp file, fsync, rename, directory fsync),
 * so a running server never reads half a file and the commands need not take
 * the server's lock.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { join } from 'node:path';
import { ROLES, type Accounts, type Role, type ScryptParams, type StoredAccount } from './credentials.js';
import { DataError } from '../errors.js';
import { removeFileSync, replaceFileSync } from '../ops/durable-files.js';
import type { SharedSettings } from '../store/store.js';

export const ACCOUNTS_FILE = 'accounts';
/**
 * The account that always exists, with role admin. Its password is, first
 * to last: its record in the accounts (set by `accounts passwd admin`),
 * USERS_ADMIN_PASSWORD, the generated one (ADMIN_PASSWORD_FILE, or the
 * database's setting).
 */
export const BUILT_IN_ACCOUNT = 'admin';
/** `<data>/admin-password`: the generated admin password in clear, until `accounts passwd admin` removes it. */
export const ADMIN_PASSWORD_FILE = 'admin-password';
/**
 * 1..64 of A-Z a-z 0-9 . _ -: no colon (RFC 7617 user-ids cannot hold one), nothing a terminal or a log line would
 * mangle.
 */
export const ACCOUNT_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const FORMAT = 1;
const ACCOUNT_ID = /^[A-Za-z0-9_-]{8,64}$/;
/** How often a running server looks at the file (a stat on the thread pool, off the request path). */
export const ACCOUNTS_POLL_MS = 250;

export interface AccountRecord extends StoredAccount {
  /** RFC 3339 time the account was added. */
  readonly created: string;
}

/** A fresh random account id: 12 base64url characters (72 bits). */
export function newAccountId(): string {
  return randomBytes(9).toString('base64url');
}

function accountsPath(dir: string): string {
  return join(dir, ACCOUNTS_FILE);
}

/** One account as the file holds it on a line, and the database in a row. */
export function serializeAccount(r: AccountRecord): string {
  return JSON.stringify({
    name: r.name,
    role: r.role,
    id: r.id,
    created: r.created,
    scrypt: {
      N: r.password.params.N,
      r: r.password.params.r,
      p: r.password.params.p,
      salt: r.password.salt.toString('base64'),
      hash: r.password.hash.toString('base64'),
    },
  });
}

/** One serialized account; throws DataError naming what is wrong. */
export function parseAccount(text: string, where: string): AccountRecord {
  let entry: unknown;
  try {
    entry = JSON.parse(text);
  } catch {
    throw new DataError(`${where}: not valid JSON`);
  }
  return parseRecord(entry, where);
}

/** The file's text: one account a line, so a diff of two versions reads well. */
export function serializeAccounts(records: readonly AccountRecord[]): string {
  const lines = records.map(serializeAccount);
  return `{"format":${FORMAT},"accounts":[\n${lines.join(',\n')}${lines.length > 0 ? '\n' : ''}]}\n`;
}

/** Parses the file's text; throws DataError naming what is wrong. */
export function parseAccounts(text: string): AccountRecord[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new DataError('not valid JSON');
  }
  if (!isObject(doc) || doc.format !== FORMAT || !Array.isArray(doc.accounts))
    throw new DataError(`not an accounts file of format ${FORMAT}`);
  const records: AccountRecord[] = [];
  const names = new Set<string>();
  doc.accounts.forEach((entry: unknown, index: number) => {
    const record = parseRecord(entry, `account ${index + 1}`);
    if (names.has(record.name)) throw new DataError(`account ${index + 1}: the name "${record.name}" appears twice`);
    names.add(record.name);
    records.push(record);
  });
  return records;
}

/**
 * A generated admin password as kept in clear (the file, the database's
 * setting): `{ password }`; or `{ record }` for a record line of the
 * admin's changed password there, the layout of an older users-server's
 * data. Never a record as a password: a generated password never starts
 * with "{".
 */
export function parseGeneratedAdminPassword(
  text: string,
  where: string,
): { password: string } | { record: AccountRecord } {
  if (!text.startsWith('{')) return { password: text };
  const record = parseAccount(text, where);
  if (record.name !== BUILT_IN_ACCOUNT)
    throw new DataError(`${where}: not the record of the account "${BUILT_IN_ACCOUNT}"`);
  return { record };
}

/** The built-in admin's record among `records`, once its password was changed. */
export function adminRecordOf(records: readonly AccountRecord[]): AccountRecord | undefined {
  return records.find((r) => r.name === BUILT_IN_ACCOUNT);
}

function parseRecord(entry: unknown, where: string): AccountRecord {
  if (!isObject(entry)) throw new DataError(`${where}: not an object`);
  const { name, role, id, created, scrypt } = entry;
  if (typeof name !== 'string' || !ACCOUNT_NAME.test(name)) throw new DataError(`${where}: bad name`);
  if (typeof role !== 'string' || !ROLES.includes(role as Role)) throw new DataError(`${where} (${name}): bad role`);
  if (name === BUILT_IN_ACCOUNT && role !== 'admin')
    throw new DataError(`${where}: "${BUILT_IN_ACCOUNT}" is built in and always has role admin`);
  if (typeof id !== 'string' || !ACCOUNT_ID.test(id)) throw new DataError(`${where} (${name}): bad id`);
  if (typeof created !== 'string') throw new DataError(`${where} (${name}): bad created time`);
  if (!isObject(scrypt)) throw new DataError(`${where} (${name}): no scrypt hash`);
  const params = { N: scrypt.N, r: scrypt.r, p: scrypt.p };
  if (!validParams(params)) throw new DataError(`${where} (${name}): bad scrypt parameters`);
  const salt = decodeBase64(scrypt.salt);
  const hash = decodeBase64(scrypt.hash);
  if (salt === undefined || salt.length < 8 || salt.length > 64) throw new DataError(`${where} (${name}): bad salt`);
  if (hash === undefined || hash.length < 16 || hash.length > 64) throw new DataError(`${where} (${name}): bad hash`);
  return { name, role: role as Role, id, created, password: { salt, hash, params } };
}

/**
 * Bounds that keep one check under 1 GiB and a few seconds: the file is
 * trusted (mode 0600), but a typo must not make every login exhaust memory.
 */
function validParams(params: Record<string, unknown>): params is Record<keyof ScryptParams, number> {
  const { N, r, p } = params;
  if (!Number.isSafeInteger(N) || !Number.isSafeInteger(r) || !Number.isSafeInteger(p)) return false;
  const n = N as number;
  return (
    n >= 2 &&
    n <= 2 ** 20 &&
    (n & (n - 1)) === 0 &&
    (r as number) >= 1 &&
    (r as number) <= 32 &&
    (p as number) >= 1 &&
    (p as number) <= 16 &&
    128 * n * (r as number) <= 2 ** 30
  );
}

function decodeBase64(value: unknown): Buffer | undefined {
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0) return undefined;
  return Buffer.from(value, 'base64');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The accounts in `<dir>/accounts`; none when the file does not exist. Throws DataError. */
export function readAccountsFile(dir: string): AccountRecord[] {
  const path = accountsPath(dir);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return [];
    throw new DataError(`cannot read ${path}: ${code ?? (error as Error).message}`);
  }
  try {
    return parseAccounts(text);
  } catch (error) {
    throw new DataError(`${path}: ${(error as Error).message}`);
  }
}

/**
 * Replaces `<dir>/accounts` atomically and durably, mode 0600 from the
 * start, so a running server never reads half a file and the hashes are
 * never readable by others. Once the admin has a record, the generated
 * password is removed: a file people are told to read never holds a
 * password that no longer logs in.
 */
export function writeAccountsFile(dir: string, records: readonly AccountRecord[]): void {
  replaceFileSync(dir, accountsPath(dir), serializeAccounts(records), 0o600);
  if (adminRecordOf(records) !== undefined) removeFileSync(dir, join(dir, ADMIN_PASSWORD_FILE));
}

function signature(stats: Stats | undefined): string {
  // A rename puts a new inode in place, so ino changes on every write even
  // when size and mtime happen to match.
  return stats === undefined ? 'absent' : `${stats.ino}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`;
}

/**
 * Keeps `accounts` in step with `<dir>/accounts` while the server runs. The
 * file is polled (fs.watchFile: an async stat every ACCOUNTS_POLL_MS), and a
 * login looks before checking a password, so an account just added can log
 * in at once. Session checks never touch the file: they stay one Map lookup.
 */
export class AccountsFileWatcher {
  private seen = '';
  private current: readonly AccountRecord[] = [];
  private readonly path: string;
  private readonly listener = () => this.refresh();
  /** The records last read (a bad file: none). */
  readonly records = (): readonly AccountRecord[] => this.current;

  /** Loads the file once (throwing DataError when it is bad) and starts polling. */
  constructor(
    private readonly dir: string,
    private readonly accounts: Accounts,
    private readonly log: (message: string) => void,
    /** Called after each re-read of a changed file, good or bad. */
    private readonly onReload: () => void = () => {},
  ) {
    this.path = accountsPath(dir);
    const before = this.stat();
    this.take(readAccountsFile(dir));
    this.seen = signature(before);
    watchFile(this.path, { interval: ACCOUNTS_POLL_MS, persistent: false }, this.listener);
  }

  /**
   * Re-reads the file when it changed since the last look. A bad file drops
   * every account it held (the built-in admin stays): failing closed, so a
   * removal cannot be undone by a broken edit; the next good write restores them.
   */
  refresh(): void {
    const current = signature(this.stat());
    if (current === this.seen) return;
    // Recorded before reading: a change landing during the read is seen next time.
    this.seen = current;
    try {
      this.take(readAccountsFile(this.dir));
    } catch (error) {
      this.take([]);
      this.log(`users-server: ${(error as Error).message}; only the built-in admin can log in until it is fixed`);
    }
    this.onReload();
  }

  close(): void {
    unwatchFile(this.path, this.listener);
  }

  private take(records: readonly AccountRecord[]): void {
    this.current = records;
    this.accounts.replaceStored(records);
  }

  private stat(): Stats | undefined {
    try {
      return statSync(this.path);
    } catch {
      return undefined;
    }
  }
}

/**
 * Keeps `accounts` in step with the accounts a database holds for every
 * instance (a PostgreSQL store), as AccountsFileWatcher does with the file:
 * polled every DATABASE_POLL_MS, and read before each login. A bad record
 * drops the shared accounts (failing closed), like a bad file.
 */
export class SharedAccountsPoller {
  private seen = '';
  private current: readonly AccountRecord[] = [];
  private readonly timer: NodeJS.Timeout;
  /** The records last read (a bad one: none). */
  readonly records = (): readonly AccountRecord[] => this.current;

  private constructor(
    private readonly shared: Pick<SharedSettings, 'accountRecords'>,
    private readonly accounts: Accounts,
    private readonly log: (message: string) => void,
    private readonly onReload: () => void,
  ) {
    this.timer = setInterval(() => void this.refresh().catch(() => {}), DATABASE_POLL_MS);
    this.timer.unref();
  }

  /** Loads the accounts once (throwing DataError when one is bad) and starts polling. */
  static async start(
    shared: Pick<SharedSettings, 'accountRecords'>,
    accounts: Accounts,
    log: (message: string) => void,
    onReload: () => void = () => {},
  ): Promise<SharedAccountsPoller> {
    const lines = await shared.accountRecords();
    const records = parseDatabaseAccounts(lines);
    const poller = new SharedAccountsPoller(shared, accounts, log, onReload);
    poller.take(records);
    poller.seen = lines.join('\n');
    return poller;
  }

  /** Reads the accounts again; takes them when they changed. */
  async refresh(): Promise<void> {
    const lines = await this.shared.accountRecords();
    const text = lines.join('\n');
    if (text === this.seen) return;
    this.seen = text;
    try {
      this.take(parseDatabaseAccounts(lines));
    } catch (error) {
      this.take([]);
      this.log(`users-server: ${(error as Error).message}; only the built-in admin can log in until it is fixed`);
    }
    this.onReload();
  }

  close(): void {
    clearInterval(this.timer);
  }

  private take(records: readonly AccountRecord[]): void {
    this.current = records;
    this.accounts.replaceStored(records);
  }
}

/** The database's account lines as records; throws DataError naming the bad one. */
export function parseDatabaseAccounts(lines: readonly string[]): AccountRecord[] {
  return lines.map((line, i) => parseAccount(line, `the database's account ${i + 1}`));
}

/** How often a running server reads the database's accounts. */
export const DATABASE_POLL_MS = 500;
