import type { IncomingMessage, ServerResponse } from 'node:http';
import { LOGIN_PATH, sessionCookieName } from '../../shared/endpoints.js';
import type { Config } from '../ops/config.js';
import type { Account, Accounts } from '../security/credentials.js';
import {
  newSessionId,
  signSession,
  verifySession,
  type SessionPayload,
  type VerifiedSession,
} from '../security/session-token.js';
import type { MaybePromise, Store } from '../store/store.js';
import { cookieValues, serializeCookie } from './cookies.js';

export interface ActiveSession {
  readonly account: Account;
  readonly payload: SessionPayload;
  /** True when an older key signed it: the response re-issues it signed with the first key. */
  readonly stale: boolean;
}

export type Access = 'read' | 'write';

interface SessionDeps {
  store: Store;
  config: Config;
  accounts: Accounts;
  keys: readonly Buffer[];
}

/** Tokens whose signature was verified, kept so a session is not re-verified on every request. */
const VERIFIED_CACHE_MAX = 10_000;

/**
 * The sessions a request carries in its USER_TOKEN cookies: reading and
 * checking them, issuing and re-issuing them (access-control.ts decides
 * what a session may do). A
 * revocation check may need the store to answer asynchronously, so the
 * methods that make one return `T | Promise<T>`.
 */
export class SessionCookies {
  /**
   * Verified tokens by their exact text, oldest first. A token is immutable
   * and the keys are fixed for the life of the process, so a signature once
   * verified stays verified; expiry, revocation and the account are still
   * checked on every request. Only tokens that verify get in, so forged
   * tokens cannot fill it; at the cap the oldest entry goes.
   */
  private readonly verified = new Map<string, VerifiedSession>();
  /** The cookie's name: USER_TOKEN, or __Host-USER_TOKEN with --cookie-secure. */
  readonly name: string;
  /** The challenge of a 401 for a missing session (RFC 9110 section 11.6.1). */
  readonly challenge: string;

  constructor(private readonly deps: SessionDeps) {
    this.name = sessionCookieName(deps.config.cookieSecure);
    this.challenge = `Cookie realm="users", cookie-name="${this.name}", form-action="${LOGIN_PATH}"`;
  }

  /** Whether the request carries a session cookie at all, valid or not. */
  carried(req: IncomingMessage): boolean {
    return cookieValues(req.headers.cookie, this.name).length > 0;
  }

  /**
   * Every session the request carries that verifies, is unexpired, is not
   * revoked and names an existing account (the same one: its id matches, so
   * a removed and re-added name does not revive old sessions), in Cookie
   * header order.
   */
  async valid(req: IncomingMessage, now: number): Promise<ActiveSession[]> {
    const nowSeconds = Math.floor(now / 1000);
    const sessions: ActiveSession[] = [];
    for (const token of cookieValues(req.headers.cookie, this.name)) {
      const session = await this.check(token, nowSeconds);
      if (session !== undefined) sessions.push(session);
    }
    return sessions;
  }

  /**
   * The first valid session, re-issued on `res` when an older key signed it (none: a check after the answer began, say
   * a feed's).
   */
  current(req: IncomingMessage, res: ServerResponse | undefined, now: number): MaybePromise<ActiveSession | undefined> {
    const header = req.headers.cookie;
    if (header === undefined) return undefined;
    return this.firstValid(cookieValues(header, this.name), 0, res, now);
  }

  /** The first valid session from `tokens[from]` on; a plain loop while the store answers at once. */
  private firstValid(
    tokens: readonly string[],
    from: number,
    res: ServerResponse | undefined,
    now: number,
  ): MaybePromise<ActiveSession | undefined> {
    const nowSeconds = Math.floor(now / 1000);
    for (let i = from; i < tokens.length; i++) {
      const session = this.check(tokens[i]!, nowSeconds);
      if (session instanceof Promise)
        return session.then((s) =>
          s === undefined ? this.firstValid(tokens, i + 1, res, now) : this.reissue(s, res, now),
        );
      if (session !== undefined) return this.reissue(session, res, now);
    }
    return undefined;
  }

  private reissue(session: ActiveSession, res: ServerResponse | undefined, now: number): ActiveSession {
    if (session.stale && res !== undefined) res.appendHeader('Set-Cookie', this.cookie(session.payload, now));
    return session;
  }

  /** The session of one token when it verifies, is unexpired, is not revoked and names its account. */
  private check(token: string, nowSeconds: number): MaybePromise<ActiveSession | undefined> {
    const verified = this.verify(token, nowSeconds);
    if (verified === undefined) return undefined;
    const revoked = this.deps.store.isRevoked(verified.payload.sessionId);
    return revoked instanceof Promise
      ? revoked.then((r) => this.activate(verified, r))
      : this.activate(verified, revoked);
  }

  private activate(verified: VerifiedSession, revoked: boolean): ActiveSession | undefined {
    if (revoked) return undefined;
    const account = this.deps.accounts.get(verified.payload.account);
    if (account === undefined || account.id !== (verified.payload.accountId ?? '')) return undefined;
    return { account, payload: verified.payload, stale: verified.keyIndex > 0 };
  }

  private verify(token: string, nowSeconds: number): VerifiedSession | undefined {
    const cached = this.verified.get(token);
    if (cached !== undefined) {
      if (cached.payload.expiresAt > nowSeconds) return cached;
      this.verified.delete(token);
      return undefined;
    }
    const verified = verifySession(token, this.deps.keys, nowSeconds);
    if (verified !== undefined) {
      if (this.verified.size >= VERIFIED_CACHE_MAX) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(token, verified);
    }
    return verified;
  }

  /** A new session for `account`, as a Set-Cookie value. */
  open(account: Account, now: number): string {
    const issuedAt = Math.floor(now / 1000);
    const payload: SessionPayload = {
      account: account.name,
      sessionId: newSessionId(),
      issuedAt,
      expiresAt: issuedAt + this.deps.config.sessionTtl,
    };
    if (account.id !== '') payload.accountId = account.id;
    return this.cookie(payload, now);
  }

  cookie(payload: SessionPayload, now: number): string {
    const maxAge = Math.max(0, payload.expiresAt - Math.floor(now / 1000));
    return serializeCookie(this.name, signSession(payload, this.deps.keys[0]!), {
      maxAge,
      secure: this.deps.config.cookieSecure,
    });
  }

  clearingCookie(): string {
    return serializeCookie(this.name, '', { maxAge: 0, secure: this.deps.config.cookieSecure });
  }
}
