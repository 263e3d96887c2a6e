import type { IncomingMessage, ServerResponse } from 'node:http';
import { LOGIN_PATH } from '../../shared/endpoints.js';
import { problems } from '../../shared/problems.js';
import { HttpError } from '../errors.js';
import type { Config } from '../ops/config.js';
import { apiTokenId, parseBearer, tokenMatches } from '../security/api-token.js';
import type { Account, Accounts, Role } from '../security/credentials.js';
import { lesserRole, tokenOwner } from '../security/token-owner.js';
import { andThen, type ApiTokenRecord, type MaybePromise, type Store } from '../store/store.js';
import type { Access, SessionCookies } from './session-cookies.js';

/** Who a request acts as: an account through its session cookie, or an API token of an account. */
interface Principal {
  /** The account's name, or the token's. */
  readonly name: string;
  /** What it may do now: the account's role, or the lesser of the token's and its account's. */
  readonly role: Role;
  readonly via: 'session' | 'token';
  /** The account it acts for: the session's, or the one that owns the token. */
  readonly account: Account;
  /** The token, when it acts through one. */
  readonly token?: ApiTokenRecord;
}

/**
 * The request being checked; a route's Context is one. `res` undefined: a
 * check again while the answer runs (a following feed), which re-issues no
 * cookie. `now` is read only when a credential is checked.
 */
interface Asker {
  readonly req: IncomingMessage;
  readonly res: ServerResponse | undefined;
  readonly now: number;
}

/** The challenge of a 401 that names a bad Bearer token (RFC 6750 section 3). */
export const INVALID_TOKEN_CHALLENGE = 'Bearer realm="users", error="invalid_token"';

/**
 * Who may do what: the `Authorization: Bearer` API token when a request
 * carries one, else its session cookie, checked against `--require-session`
 * (for /users and /metrics) or against the admin role (for /tokens).
 *
 * A Bearer token that is sent is always checked, in every mode: one that is
 * wrong, expired or revoked is refused with 401 `invalid-token`, so a script
 * learns at once that its token stopped working, not the day the mode
 * changes. A request with a token is judged by the token alone: its cookies
 * are not read.
 */
export class AccessControl {
  /** The challenges of a 401 for missing credentials: the cookie, then Bearer. */
  readonly challenge: string;
  /** `--require-session`, read once: the config is a large object, slower to read on every request. */
  private readonly mode: Config['requireSession'];

  constructor(private readonly deps: { store: Store; config: Config; sessions: SessionCookies; accounts: Accounts }) {
    this.challenge = `${deps.sessions.challenge}, Bearer realm="users"`;
    this.mode = deps.config.requireSession;
  }

  /**
   * The request's principal: its token's (refusing a bad one), else its
   * first valid session's, else undefined.
   */
  principal(req: IncomingMessage, res: ServerResponse | undefined, now: number): MaybePromise<Principal | undefined> {
    const bearer = parseBearer(req.headers.authorization);
    if (bearer !== undefined) return this.tokenPrincipal(bearer, now);
    return andThen(this.deps.sessions.current(req, res, now), (session) =>
      session === undefined
        ? undefined
        : { name: session.account.name, role: session.account.role, via: 'session' as const, account: session.account },
    );
  }

  /**
   * Enforces `--require-session` for /users, /changes and /metrics: 401
   * without a valid session or token where the mode asks for one, 403 for
   * a reader's write. A credential the request presents is held to its
   * role in every mode: a reader's write is 403 even where writes are open.
   * Undefined (nothing to wait for) when nothing is asked and nothing is
   * presented.
   */
  authorize(asker: Asker, access: Access): MaybePromise<void> {
    const { req, res } = asker;
    const needed = this.needs(access);
    if (!needed && !this.presented(req, access)) return undefined;
    // The clock is read only past this point: an open read never asks for the time.
    const now = asker.now;
    // A read that needs a session answers what this client may see: no shared cache (a proxy's, a CDN's) may keep it
    // for others.
    if (needed && access !== 'write' && res !== undefined && !res.headersSent)
      res.setHeader('Cache-Control', 'private');
    return andThen(this.principal(req, res, now), (principal) => {
      if (principal !== undefined || needed) this.permit(principal, access === 'write' ? 'admin' : undefined);
    });
  }

  /** Whether `--require-session` asks a credential of this kind of request. */
  private needs(access: Access): boolean {
    const mode = this.mode;
    if (mode === 'all') return true;
    return mode === 'writes' && access === 'write';
  }

  /**
   * Whether an open request presents a credential worth checking: a Bearer
   * token always (a bad one is 401 in every mode), a session cookie on a
   * write (a reader's is 403). An open read's cookie is not read: whoever
   * holds it may read anyway.
   */
  private presented(req: IncomingMessage, access: Access): boolean {
    if (req.headers.authorization !== undefined) return true;
    return access === 'write' && req.headers.cookie !== undefined;
  }

  /** The /tokens endpoints: an admin's session or token, in every mode. */
  requireAdmin(req: IncomingMessage, res: ServerResponse, now: number): MaybePromise<Principal> {
    return andThen(this.principal(req, res, now), (principal) => this.permit(principal, 'admin'));
  }

  /** For GET /: undefined without a Bearer field, else whether its token is valid now. */
  tokenValid(req: IncomingMessage, now: number): MaybePromise<boolean> | undefined {
    const bearer = parseBearer(req.headers.authorization);
    if (bearer === undefined) return undefined;
    const id = apiTokenId(bearer);
    if (id === undefined) return false;
    return andThen(
      this.deps.store.findToken(id),
      (record) => typeof checkToken(record, bearer, now, this.deps.accounts) !== 'string',
    );
  }

  private tokenPrincipal(token: string, now: number): MaybePromise<Principal> {
    const id = apiTokenId(token);
    if (id === undefined) throw invalidToken('The Bearer credential is not an API token of this server (ust_...).');
    return andThen(this.deps.store.findToken(id), (record) => principalOfToken(record, token, now, this.deps.accounts));
  }

  private permit(principal: Principal | undefined, role: Role | undefined): Principal {
    if (principal === undefined) {
      throw new HttpError(
        problems.unauthorized,
        `Log in first: POST ${LOGIN_PATH} with Basic credentials (usersctl login), or send an API token: Authorization: Bearer ust_... (usersctl --token).`,
        { 'WWW-Authenticate': this.challenge },
      );
    }
    if (role === 'admin' && principal.role !== 'admin') {
      throw new HttpError(problems.forbidden, `${describePrincipal(principal)}, which may only read.`);
    }
    return principal;
  }
}

function principalOfToken(
  record: ApiTokenRecord | undefined,
  token: string,
  now: number,
  accounts: Accounts,
): Principal {
  const checked = checkToken(record, token, now, accounts);
  if (typeof checked === 'string') throw invalidToken(checked);
  const { valid, owner } = checked;
  return { name: valid.name, role: lesserRole(valid.role, owner.role), via: 'token', account: owner, token: valid };
}

/** The token `record` keeps and the account it acts for when `token` is valid now; else why it is not. */
function checkToken(
  record: ApiTokenRecord | undefined,
  token: string,
  now: number,
  accounts: Accounts,
): { valid: ApiTokenRecord; owner: Account } | string {
  if (record === undefined || !tokenMatches(token, record.hash))
    return 'The API token is not known to this server: it was revoked, or never issued here.';
  if (record.expiresAt !== undefined && record.expiresAt <= now)
    return `The API token "${record.name}" expired at ${new Date(record.expiresAt).toISOString()}.`;
  const owner = tokenOwner(record, accounts);
  if (owner === undefined)
    return `The API token "${record.name}" belonged to the account "${record.createdBy}", which was removed.`;
  return { valid: record, owner };
}

function invalidToken(detail: string): HttpError {
  return new HttpError(problems.invalidToken, `${detail} Create a new one with: usersctl tokens create NAME`, {
    'WWW-Authenticate': INVALID_TOKEN_CHALLENGE,
  });
}

/** Who a principal is and what it may do, for a 403's detail. */
function describePrincipal(principal: Principal): string {
  if (principal.token === undefined) return `The account "${principal.name}" has role ${principal.role}`;
  const lowered =
    principal.token.role !== principal.role
      ? `, lowered to ${principal.role}: its account "${principal.account.name}" has role ${principal.account.role}`
      : '';
  return `The API token "${principal.name}" has role ${principal.token.role}${lowered}`;
}
