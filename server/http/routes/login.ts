import type { IncomingMessage, ServerResponse } from 'node:http';
import { LOGIN_PATH, LOGOUT_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import { quoteLogText } from '../../ops/log-text.js';
import { andThen } from '../../store/store.js';
import { parseBasicAuth } from '../../security/credentials.js';
import { LoginLimiter, type LoginLimits, type LoginSlot } from '../../security/login-limit.js';
import { limitKey } from '../../security/rate-limit.js';
import { BUSY_RETRY_SECONDS, FailureBudget, HashingGate } from '../../security/login-load.js';
import { clientAddress } from '../client-address.js';
import { INVALID_TOKEN_CHALLENGE } from '../access-control.js';
import { isUrlEncodedForm, JSON_TYPE } from '../media-type.js';
import { prefersHtml } from '../negotiation.js';
import { empty, html, json, problemOrPage, SESSION_OPTIONAL } from '../openapi.js';
import { header, readBody } from '../request.js';
import { sendEmpty } from '../response.js';
import type { Context, OperationDoc, Route, RouteDeps } from '../route.js';
import { browserSignIn, type BrowserSignIn, type LoginAttempt, type SessionActions } from './browser-sign-in.js';

// SPEC.md row 6 fixes these bodies: the JSON strings "OK" and "not authorized".
const OK_BODY = JSON.stringify('OK');
const NOT_AUTHORIZED_BODY = JSON.stringify('not authorized');
const BASIC_CHALLENGE = 'Basic realm="users"';

function sendRoot(res: ServerResponse, status: 200 | 401, body: string, challenge: string, vary = 'Cookie'): void {
  const fields = [
    'Content-Type',
    JSON_TYPE,
    'Content-Length',
    String(body.length),
    'Cache-Control',
    'no-store',
    'Vary',
    vary,
  ];
  if (status === 401) fields.push('WWW-Authenticate', challenge);
  // One list, as in sendJson: GET / is on the hot path too.
  res.writeHead(status, fields);
  res.end(body);
}

/** What a login came to, as the log line says it. */
function outcomeOf(attempt: LoginAttempt, known: boolean): string {
  if ('account' in attempt) return 'ok';
  if ('wait' in attempt) return 'rate-limited';
  if ('busy' in attempt) return 'busy';
  return known ? 'wrong-password' : 'unknown-account';
}

/** GET /, POST /login and POST /logout; with --login-page also GET /login, the browser sign-in page. */
export function sessionRoutes(deps: RouteDeps): Route[] {
  const routes = new LoginRoutes(deps);
  const table: Route[] = [
    { method: 'GET', path: '/', handler: (ctx) => routes.root(ctx), doc: ROOT_DOC },
    { method: 'POST', path: LOGIN_PATH, handler: (ctx) => routes.login(ctx), doc: LOGIN_DOC },
    { method: 'POST', path: LOGOUT_PATH, handler: (ctx) => routes.logout(ctx), doc: LOGOUT_DOC },
  ];
  // Only with the flag: without it GET /login stays a 405 (Allow: POST, OPTIONS).
  const browser = routes.browser;
  if (browser !== undefined)
    table.splice(1, 0, { method: 'GET', path: LOGIN_PATH, handler: browser.show, doc: SIGN_IN_PAGE_DOC });
  return table;
}

/** Logins waiting for a hashing slot before the next one is refused. */
const HASHING_QUEUE = 16;
/** Places of that queue one client address may hold. */
const HASHING_QUEUE_PER_CLIENT = 4;

class LoginRoutes implements SessionActions {
  private readonly limiter: LoginLimits;
  private readonly gate: HashingGate;
  private readonly budget: FailureBudget;
  readonly browser: BrowserSignIn | undefined;

  constructor(private readonly deps: RouteDeps) {
    this.limiter = deps.loginLimits ?? new LoginLimiter();
    this.gate = new HashingGate(deps.config.loginConcurrency, HASHING_QUEUE, HASHING_QUEUE_PER_CLIENT);
    this.budget = new FailureBudget(deps.config.loginFailuresPerMinute);
    this.browser = deps.config.loginPage ? browserSignIn(deps, this) : undefined;
  }

  /** GET /, on the hot path: no promise unless the store makes the session check wait. */
  root({ req, res, now }: Context): void | Promise<void> {
    const token = this.deps.access.tokenValid(req, now);
    if (token !== undefined) return andThen(token, (valid) => this.answerToken(res, valid));
    const session = this.deps.sessions.current(req, res, now);
    if (session instanceof Promise) return session.then((s) => this.answerRoot(req, res, s !== undefined));
    this.answerRoot(req, res, session !== undefined);
  }

  /** GET / with an API token: the same answers, the Bearer challenge on a 401. */
  private answerToken(res: ServerResponse, valid: boolean): void {
    sendRoot(res, valid ? 200 : 401, valid ? OK_BODY : NOT_AUTHORIZED_BODY, INVALID_TOKEN_CHALLENGE);
  }

  private answerRoot(req: IncomingMessage, res: ServerResponse, signedIn: boolean): void {
    if (this.browser === undefined) {
      sendRoot(res, signedIn ? 200 : 401, signedIn ? OK_BODY : NOT_AUTHORIZED_BODY, this.deps.sessions.challenge);
      return;
    }
    // The answer now depends on Accept too (RFC 9110 section 12.5.5).
    const vary = 'Accept, Cookie';
    if (signedIn) sendRoot(res, 200, OK_BODY, this.deps.sessions.challenge, vary);
    // SPEC.md "Authentication" 7: a browser without a session goes to the login page.
    else if (prefersHtml(header(req, 'accept')))
      sendEmpty(res, 302, { Location: LOGIN_PATH, 'Cache-Control': 'no-store', Vary: vary });
    else sendRoot(res, 401, NOT_AUTHORIZED_BODY, this.deps.sessions.challenge, vary);
  }

  async login(ctx: Context): Promise<void> {
    const { req, res, now } = ctx;
    // A form without Authorization is the page's; anything with
    // Authorization (curl -u -d sends a form type too) is the API's.
    if (
      this.browser !== undefined &&
      req.headers.authorization === undefined &&
      isUrlEncodedForm(req.headers['content-type'])
    )
      return this.browser.login(ctx);
    await readBody(req, this.deps.config.maxBody);
    const credentials = parseBasicAuth(req.headers.authorization);
    if (!credentials) {
      this.logLogin(req, '', now, 'no-credentials');
      throw this.loginFailed(req, 'Send Basic credentials: Authorization: Basic base64(user:password).');
    }
    const attempt = await this.checkPassword(req, credentials.user, credentials.password, now);
    if ('wait' in attempt) {
      const which = attempt.scope === 'account' ? 'for this account from this address' : 'from this address';
      throw new HttpError(
        problems.tooManyRequests,
        `Too many failed logins ${which}; try again in ${attempt.wait} s.`,
        { 'Retry-After': String(attempt.wait) },
      );
    }
    if ('busy' in attempt) {
      throw new HttpError(
        problems.loginBusy,
        `The server is checking as many logins as it may; retry in ${attempt.busy} s.`,
        { 'Retry-After': String(attempt.busy) },
      );
    }
    if ('wrong' in attempt) throw this.loginFailed(req, 'The user name or password is wrong.');
    res.setHeader('Set-Cookie', this.deps.sessions.open(attempt.account, now));
    sendRoot(res, 200, OK_BODY, this.deps.sessions.challenge);
  }

  /**
   * A failed API login. Its challenge is Basic, except to a page's script
   * (`Sec-Fetch-Mode` cors or same-origin: fetch or XMLHttpRequest, never a
   * navigation), which sends the credentials itself, and for which a Basic
   * challenge would open the browser's own password dialog: it gets the
   * session cookie's challenge, as the sign-in page's 401 does.
   */
  private loginFailed(req: IncomingMessage, detail: string): HttpError {
    const mode = req.headers['sec-fetch-mode'];
    const script = mode === 'cors' || mode === 'same-origin';
    return new HttpError(problems.loginFailed, detail, {
      'WWW-Authenticate': script ? this.deps.sessions.challenge : BASIC_CHALLENGE,
    });
  }

  async logout(ctx: Context): Promise<void> {
    if (this.browser !== undefined) return this.browser.logout(ctx);
    const { req, res, now } = ctx;
    await readBody(req, this.deps.config.maxBody);
    await this.revoke(req, now);
    sendEmpty(res, 204, { 'Set-Cookie': this.deps.sessions.clearingCookie(), 'Cache-Control': 'no-store' });
  }

  /** Every login, its client and its outcome, in one line (docs/operations.md "Logins"). */
  async checkPassword(req: IncomingMessage, user: string, password: string, now: number): Promise<LoginAttempt> {
    const attempt = await this.attempt(req, user, password, now);
    this.logLogin(req, user, now, outcomeOf(attempt, this.deps.accounts.get(user) !== undefined));
    return attempt;
  }

  logLogin(req: IncomingMessage, user: string, now: number, outcome: string): void {
    const verdict = outcome === 'ok' ? 'ok' : 'failed';
    this.deps.log(
      `${new Date(now).toISOString()} users-server: login ${verdict} client=${clientAddress(req, this.deps.config)} account=${quoteLogText(user)} outcome=${outcome}`,
    );
  }

  private async attempt(req: IncomingMessage, user: string, password: string, now: number): Promise<LoginAttempt> {
    const address = clientAddress(req, this.deps.config);
    const client = limitKey(address);
    // A user signed in as this account, signing in again, is let through a flood of others.
    const signedIn = await this.signedInAs(req, user, now);
    const spent = signedIn ? undefined : this.budget.spent(client, now);
    if (spent !== undefined) return { busy: spent };
    // Checked before scrypt runs: a limited guess costs the server nothing,
    // and the right password is refused too, so the limit cannot be probed.
    const taken = await this.limiter.take(address, user, now);
    if (!('slot' in taken)) return taken;
    try {
      return await this.check(taken.slot, client, user, password, signedIn, now);
    } catch (error) {
      // A try that ends in an error was not checked: it counts for nothing.
      await taken.slot.released();
      throw error;
    }
  }

  /** Whether the request carries a valid session of the account `user`. */
  private async signedInAs(req: IncomingMessage, user: string, now: number): Promise<boolean> {
    if (req.headers.cookie === undefined) return false;
    return (await this.deps.sessions.valid(req, now)).some((session) => session.account.name === user);
  }

  /** The password check of a try that holds its slot, which it settles. */
  private async check(
    slot: LoginSlot,
    client: string,
    user: string,
    password: string,
    signedIn: boolean,
    now: number,
  ): Promise<LoginAttempt> {
    await this.deps.accountsFile?.refresh();
    const verified = this.gate.run(
      () => this.deps.accounts.verify(user, password),
      signedIn ? { client, signedInAs: user } : { client },
    );
    if (verified === undefined) {
      await slot.released();
      return { busy: BUSY_RETRY_SECONDS };
    }
    const account = await verified;
    if (!account) {
      await slot.failed();
      this.budget.record(client, now);
      return { wrong: true };
    }
    await slot.succeeded();
    return { account };
  }

  async revoke(req: IncomingMessage, now: number): Promise<void> {
    // Revoke on the server too: a saved copy of the cookie must stop working.
    const valid = await this.deps.sessions.valid(req, now);
    await this.deps.store.revokeSessions(
      valid.map((s) => ({ sessionId: s.payload.sessionId, expiresAt: s.payload.expiresAt * 1000 })),
    );
  }
}

// ------------------------------------------------------------ OpenAPI

const ROOT_DOC: OperationDoc = {
  operationId: 'getSessionStatus',
  summary: 'Whether the request carries a valid session',
  description:
    'Both answers are JSON strings, not problem documents, with `Cache-Control: no-store` and `Vary: Cookie`. A session signed by an older key is re-issued (`Set-Cookie`). ' +
    'With `--login-page`, a request without a session whose `Accept` weighs `text/html` above `application/json` is redirected (302) to `/login`, and every answer carries `Vary: Accept, Cookie`.',
  tags: ['sessions'],
  security: SESSION_OPTIONAL,
  responses: {
    '200': json('A valid session.', { const: 'OK' }, 'Set-Cookie'),
    '302': empty('`--login-page` only: a browser without a session; `Location: /login`.', 'Location'),
    '401': json('No valid session.', { const: 'not authorized' }, 'WWW-Authenticate'),
  },
  problems: [],
};

const SIGN_IN_PAGE_DOC: OperationDoc = {
  operationId: 'getLoginPage',
  summary: 'The browser sign-in page (`--login-page`)',
  description:
    'An HTML form that posts `username`, `password` and a signed `csrf` token to `POST /login` (`application/x-www-form-urlencoded`); ' +
    'the token\'s nonce is also set in the `LOGIN_FORM` cookie. With a valid session: "Signed in as NAME" and a sign-out form to `POST /logout`. ' +
    'Strict `Content-Security-Policy`, `X-Frame-Options: DENY`, `Cache-Control: no-store`. Exists only with `--login-page`.',
  tags: ['sessions'],
  security: SESSION_OPTIONAL,
  responses: { '200': html('The sign-in page, or the sign-out page for a valid session.', 'Set-Cookie') },
  problems: [],
};

const LOGIN_DOC: OperationDoc = {
  operationId: 'login',
  summary: 'Open a session with HTTP Basic credentials',
  description:
    'Any request body is read and ignored. Failed logins are limited per address and account, and per address. ' +
    "With `--login-page`, a form body (`application/x-www-form-urlencoded`) without `Authorization` is the sign-in page's: " +
    '303 to `/` with the session cookie, or the page again (HTML) with 401 (wrong password), 403 (bad or expired `csrf` token, another `Origin`) or 429.',
  tags: ['sessions'],
  security: [{ basic: [] }],
  responses: {
    '200': json('Logged in: the session cookie is set.', { const: 'OK' }, 'Set-Cookie'),
    '303': empty('`--login-page` form: signed in; `Location: /`, the session cookie is set.', 'Location', 'Set-Cookie'),
    '401': problemOrPage(
      'Wrong or missing credentials: `login-failed`; the sign-in form (`--login-page`) gets the page again with the error.',
      'WWW-Authenticate',
    ),
    '403': problemOrPage(
      'The sign-in form (`--login-page`) with a bad or expired `csrf` token or another `Origin`: the page again with a fresh token.',
    ),
    '429': problemOrPage(
      'Too many failed logins for this address and account, or from this address (`too-many-requests`), or the rate limit; the sign-in form gets the page again.',
      'Retry-After',
      'RateLimit-Policy',
      'RateLimit',
    ),
    '503': problemOrPage(
      "`login-busy`: too many logins being checked (for this address, or for this address and account), or the failure budget spent (server-wide, or this address's share); not counted as a failure; the sign-in form gets the page again.",
      'Retry-After',
    ),
  },
  problems: [413],
};

const LOGOUT_DOC: OperationDoc = {
  operationId: 'logout',
  summary: 'Revoke every valid session the request carries and clear the cookie',
  description:
    'Answers 204 whether or not a session was sent. Any request body is read and ignored. ' +
    "With `--login-page`: a request whose `Origin` is another origin is refused (403), and a form body is the sign-out form's: " +
    "it needs the page's `csrf` token, then answers 303 to `/login` (else 403 and the page again).",
  tags: ['sessions'],
  security: SESSION_OPTIONAL,
  responses: {
    '204': empty('Logged out: the cookie is cleared.', 'Set-Cookie'),
    '303': empty(
      '`--login-page` form: signed out; `Location: /login`, the cookie is cleared.',
      'Location',
      'Set-Cookie',
    ),
    '403': problemOrPage(
      'From a page of another site or origin with the session cookie: `forbidden`; the sign-out form (`--login-page`) with a bad `csrf` token or another `Origin` gets the page again.',
    ),
  },
  problems: [413],
};
