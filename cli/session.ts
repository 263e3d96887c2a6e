/**
 * The session usersctl keeps in its cookie jar through one run: the one
 * owner of the jar's state. The jar is loaded at its first use (a command
 * that sends no cookie never loads tough-cookie), gives each request its
 * Cookie header, takes what answers set, and is written back only when an
 * answer set or cleared a cookie.
 */
import { constants } from 'node:fs';
import { access, copyFile } from 'node:fs/promises';
import type { CookieJar } from 'tough-cookie';
import { fileProblem } from '../shared/file-errors.js';
import { CliError, EXIT } from './exit-codes.js';
import { cookieKey, loadJar, saveJar, type SetBy } from './jar.js';

interface SessionOptions {
  jarPath: string;
  /** The server (--url) this run talks to: it is noted as the setter of the cookies it sets. */
  server: string;
  /** Non-fatal messages (cookie-jar warnings). */
  warn: (message: string) => void;
}

/** Jar lines skipped that are each named on stderr; the rest are counted in one line. */
const MAX_JAR_WARNINGS = 3;
/** How long a computed Cookie header is reused before the jar is asked again (expiry is in seconds). */
const COOKIE_CACHE_MS = 1_000;

export class CookieSession {
  private jarLoad: Promise<CookieJar> | undefined;
  private changed = false;
  /** Lines of the jar file that were not cookies: kept aside before the file is rewritten without them. */
  private skipped = 0;
  /** The server that set each cookie of the jar, where the jar file says. */
  private setBy: SetBy = new Map();
  private cookieCache: { key: string; value: string; at: number } | undefined;
  private pathSpecific: boolean | undefined;

  constructor(private readonly options: SessionOptions) {}

  /** The jar, loaded on first use; a missing file is an empty jar. */
  load(): Promise<CookieJar> {
    this.jarLoad ??= loadJar(this.options.jarPath).then(
      ({ jar, warnings, setBy }) => {
        this.skipped = warnings.length;
        this.setBy = setBy;
        this.warnSkipped(warnings);
        return jar;
      },
      (error: unknown) => {
        throw new CliError(
          `the cookie jar: ${fileProblem('read', this.options.jarPath, error)} (or give another with --cookie-jar)`,
          EXIT.unexpected,
        );
      },
    );
    return this.jarLoad;
  }

  /** Names the first skipped lines of the jar file and counts the rest. */
  private warnSkipped(warnings: readonly string[]): void {
    const { jarPath, warn } = this.options;
    // A file that is not a jar at all (a wrong --cookie-jar) would give a line per line of it.
    for (const warning of warnings.slice(0, MAX_JAR_WARNINGS)) warn(`cookie jar ${jarPath}: ${warning}`);
    const more = warnings.length - MAX_JAR_WARNINGS;
    if (more > 0)
      warn(
        `cookie jar ${jarPath}: ${more} more line${more === 1 ? '' : 's'} skipped; is it the cookie file you meant to give?`,
      );
  }

  /**
   * Writes the jar back now if an answer set or cleared a cookie: `login` says where the session is only once it is
   * there.
   */
  async save(): Promise<void> {
    if (!this.changed || this.jarLoad === undefined) return;
    const jar = await this.jarLoad;
    await this.keepSkippedLines();
    await saveJar(jar, this.options.jarPath, this.setBy).catch((error: unknown) => {
      throw new CliError(
        `the cookie jar: ${fileProblem('write', this.options.jarPath, error)} (or give another with --cookie-jar)`,
        EXIT.unexpected,
      );
    });
    this.changed = false;
  }

  /**
   * Rewriting a jar drops the lines that were not cookies: the file as it
   * was is copied aside first (a --cookie-jar that named the wrong file
   * keeps its content), and a warning says where.
   */
  private async keepSkippedLines(): Promise<void> {
    if (this.skipped === 0) return;
    const aside = `${this.options.jarPath}.before-${new Date().toISOString().replaceAll(':', '')}`;
    try {
      await copyFile(this.options.jarPath, aside, constants.COPYFILE_EXCL);
    } catch (error) {
      throw new CliError(
        `the cookie jar: it holds ${this.skipped} lines that are not cookies and cannot be kept aside (${fileProblem('write', aside, error)}), so it was left as it was; give another --cookie-jar`,
        EXIT.unexpected,
      );
    }
    this.options.warn(
      `cookie jar ${this.options.jarPath}: the file as it was, with the ${this.skipped} lines that are not cookies, is kept in ${aside}`,
    );
    this.skipped = 0;
  }

  /** The Cookie header for a request to `url`: '' when the jar holds none for it. */
  async cookieHeader(url: string): Promise<string> {
    // No jar file and nothing stored yet: no cookies, and no need to load the cookie library.
    if (this.jarLoad === undefined && !(await exists(this.options.jarPath))) return '';
    const jar = await this.load();
    // The Cookie header depends on the path only through cookies' Path
    // attributes; import sends 100,000 distinct paths, so while every cookie
    // has Path=/ one header serves the whole origin.
    this.pathSpecific ??= (await jar.serialize()).cookies.some((c) => typeof c.path === 'string' && c.path !== '/');
    const key = this.pathSpecific ? url : '';
    const now = Date.now();
    if (this.cookieCache !== undefined && this.cookieCache.key === key && now - this.cookieCache.at < COOKIE_CACHE_MS)
      return this.cookieCache.value;
    const value = await jar.getCookieString(url);
    this.cookieCache = { key, value, at: now };
    return value;
  }

  /** Stores the cookies an answer from `url` set (its `Set-Cookie` fields). */
  async storeCookies(url: string, setCookie: string | string[] | undefined): Promise<void> {
    if (setCookie === undefined) return;
    const jar = await this.load();
    for (const line of Array.isArray(setCookie) ? setCookie : [setCookie]) {
      // A cookie tough-cookie refuses (wrong domain, bad syntax) is skipped, as a browser would.
      const stored = await jar.setCookie(line, url, { ignoreError: true });
      if (stored === undefined) continue;
      this.changed = true;
      this.noteSetter(cookieKey(stored), stored.key);
    }
    this.cookieCache = undefined;
    this.pathSpecific = undefined;
  }

  /**
   * Notes that this server set the cookie `key`, and says so when it replaced one another server (another port of the
   * host) had set.
   */
  private noteSetter(key: string, name: string): void {
    const { server, jarPath } = this.options;
    const before = this.setBy.get(key);
    this.setBy.set(key, server);
    if (before === undefined || before === server) return;
    this.options.warn(
      `${server} replaced the cookie ${name} that ${before} had set in ${jarPath}: cookies do not tell ports apart (RFC 6265 section 8.5), so a jar holds one session a host; give each server its own --cookie-jar FILE`,
    );
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
