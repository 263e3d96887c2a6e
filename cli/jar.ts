/**
 * usersctl's cookie jar: tough-cookie's CookieJar in memory, a Netscape cookie
 * file (shared/cookie-file.ts) on disk, so curl -b/-c, wget and python's
 * MozillaCookieJar can share the session with usersctl. Above each cookie a
 * comment notes the server that set it (`# usersctl: set by URL`): cookies
 * do not tell ports apart (RFC 6265 section 8.5), so the file alone cannot
 * say which of two servers on one host a session belongs to.
 */
import { randomBytes } from 'node:crypto';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import type { Cookie, CookieJar } from 'tough-cookie';
import { formatCookieFile, parseCookieFile, type CookieLine } from '../shared/cookie-file.js';
import { makeDirectories } from '../shared/directories.js';

// The latest instant a JS Date holds (ECMA-262 "Time Values"), in seconds. A
// file may carry a later expiry (curl writes up to 2^63-1 on overflow).
const MAX_DATE_SECONDS = 8_640_000_000_000;

const SET_BY = /^usersctl: set by (\S+)$/;

/** The servers (their --url) that set the jar's cookies, by `cookieKey`. */
export type SetBy = Map<string, string>;

/** What names a cookie in a jar: two cookies with the same key are one (RFC 6265 section 5.3 step 11). */
export function cookieKey(cookie: Cookie): string {
  return `${cookie.domain}\t${cookie.path}\t${cookie.key}`;
}

/**
 * Reads the cookie file at `path` into a new CookieJar. A missing file is an
 * empty jar; malformed lines are skipped and returned as warnings; expired
 * cookies are dropped (as curl's remove_expired does after reading a file).
 */
export async function loadJar(path: string): Promise<{ jar: CookieJar; warnings: string[]; setBy: SetBy }> {
  // Loaded here, not at start: a command that never sends a request never pays for it.
  const toughCookie = await import('tough-cookie');
  const store = new toughCookie.MemoryCookieStore();
  const jar = new toughCookie.CookieJar(store);
  const setBy: SetBy = new Map();
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { jar, warnings: [], setBy };
    throw error;
  }
  const { cookies, warnings } = parseCookieFile(text);
  const now = new Date();
  for (const line of cookies) {
    if (line.expires !== 0 && line.expires * 1000 <= now.getTime()) continue;
    // Straight into the store, as CookieJar.deserialize does: setCookie would
    // re-derive domain and host-only from a request URL, which a file has not.
    // The same creation time for all and tough-cookie's increasing
    // creationIndex keep file order as the RFC 6265 section 5.4 order of equal-path cookies.
    const cookie = toCookie(toughCookie, line, now);
    await store.putCookie(cookie);
    const server = SET_BY.exec(line.comment ?? '')?.[1];
    if (server !== undefined) setBy.set(cookieKey(cookie), server);
  }
  return { jar, warnings, setBy };
}

function toCookie(lib: typeof import('tough-cookie'), line: CookieLine, now: Date): Cookie {
  return new lib.Cookie({
    key: line.name,
    value: line.value,
    domain: lib.canonicalDomain(line.domain) ?? line.domain.toLowerCase(),
    hostOnly: !line.includeSubdomains,
    path: line.path,
    secure: line.secure,
    httpOnly: line.httpOnly,
    // tough-cookie's "Infinity" expiry is its session cookie (isPersistent() false).
    expires: line.expires === 0 ? 'Infinity' : new Date(Math.min(line.expires, MAX_DATE_SECONDS) * 1000),
    creation: now,
    lastAccessed: now,
  });
}

/**
 * Writes every unexpired cookie of `jar` to `path`, atomically: a temp file in
 * the same directory (so rename stays on one filesystem), mode 0600, fsynced,
 * then renamed over `path`. The parent directory is created 0700 when missing.
 * A reader sees the old file or the new one, never a torn one.
 */
export async function saveJar(jar: CookieJar, path: string, setBy: SetBy = new Map()): Promise<void> {
  const now = Date.now();
  const lines: CookieLine[] = [];
  // getAllCookies sorts by creationIndex: oldest first, the order loadJar restores.
  for (const cookie of await jar.store.getAllCookies()) {
    const line = toLine(cookie, now);
    const server = setBy.get(cookieKey(cookie));
    if (line !== undefined)
      lines.push(server === undefined ? line : { ...line, comment: `usersctl: set by ${server}` });
  }
  await writeFileAtomic(path, formatCookieFile(lines));
}

function toLine(cookie: Cookie, now: number): CookieLine | undefined {
  if (cookie.domain === null || cookie.domain === '') return undefined;
  let expires = 0;
  if (cookie.isPersistent()) {
    // expiryTime() applies Max-Age from lastAccessed (tough-cookie sets it when
    // the cookie is stored, and again on each getCookies), and gives -Infinity
    // for Max-Age <= 0. A cookie received in this process may so be written up
    // to the process's remaining run time later than received + Max-Age; the
    // server checks the expiry signed into the session anyway. A loaded cookie
    // has an absolute Expires and does not drift.
    const expiry = cookie.expiryTime();
    if (expiry === undefined || expiry <= now) return undefined;
    // A persistent cookie must not come back as a session one: never write 0.
    expires = Math.max(1, Math.min(Math.floor(expiry / 1000), MAX_DATE_SECONDS));
  }
  return {
    domain: cookie.domain,
    // tough-cookie treats a null hostOnly as a domain cookie when matching.
    includeSubdomains: cookie.hostOnly !== true,
    path: cookie.path ?? '/',
    secure: cookie.secure,
    httpOnly: cookie.httpOnly,
    expires,
    name: cookie.key,
    value: cookie.value,
  };
}

async function writeFileAtomic(path: string, text: string): Promise<void> {
  const dir = dirname(path);
  // An existing directory keeps its mode; new ones get 0700 (the jar holds
  // a session, so the directory is as private as the file).
  makeDirectories(resolve(dir), 0o700);
  const temp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temp, 'wx', 0o600);
  try {
    try {
      // Explicit: the mode given to open() is reduced by the umask.
      await handle.chmod(0o600);
      await handle.writeFile(text, 'utf8');
      // Data on disk before the rename makes it visible; otherwise a crash can
      // leave an empty file under the final name.
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  }
  await syncDirectory(dir);
}

// The rename itself is durable only once the directory is fsynced. Not
// possible on Windows (EPERM/EISDIR), where rename is as durable as it gets.
async function syncDirectory(dir: string): Promise<void> {
  if (process.platform === 'win32') return;
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * $XDG_STATE_HOME/usersctl/cookies.txt; XDG_STATE_HOME defaults to
 * ~/.local/state, and a relative value is ignored (XDG Base Directory spec).
 */
export function defaultJarPath(env: NodeJS.ProcessEnv): string {
  const state = env.XDG_STATE_HOME;
  const base = state !== undefined && isAbsolute(state) ? state : join(env.HOME || homedir(), '.local', 'state');
  return join(base, 'usersctl', 'cookies.txt');
}
