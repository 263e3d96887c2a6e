import type { IncomingMessage, ServerResponse } from 'node:http';
import { LOGIN_PATH, LOGOUT_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { prefersHtml } from '../negotiation.js';
import { parseBasicAuth } from '../../security/accounts.js';
import type { AppDeps } from '../app.js';
import { clientAddress } from '../client-address.js';
import { HttpError } from '../http-error.js';
import { header, readBody, sendEmpty } from '../response.js';
import { isUrlEncodedForm } from '../../security/form-token.js';
import { LoginLimiter, loginLimitKey } from '../../security/login-limit.js';
import type { Route } from '../router.js';
import { COOKIE_CHALLENGE, type Sessions } from '../session-cookies.js';
import { browserSignIn, type LoginAttempt, type SessionActions } from './browser-sign-in.js';

// SPEC.md row 6 fixes these bodies: the JSON strings "OK" and "not authorized".
const OK_BODY = JSON.stringify('OK');
const NOT_AUTHORIZED_BODY = JSON.stringify('not authorized');
const BASIC_CHALLENGE = 'Basic realm="users"';

function sendRoot(res: ServerResponse, status: 200 | 401, body: string, vary = 'Cookie'): void {
  const fields = ['Content-Type', 'application/json', 'Content-Length', String(body.length), 'Cache-Control', 'no-store', 'Vary', vary];
  if (status === 401) fields.push('WWW-Authenticate', COOKIE_CHALLENGE);
  // One list, as in sendJson: GET / is on the hot path too.
  res.writeHead(status, fields);
  res.end(body);
}

/** GET /, POST /login and POST /logout; with --login-page also GET /login, the browser sign-in page. */
export function sessionRoutes(deps: AppDeps, sessions: Sessions): Route[] {
  const { config, store, accounts } = deps;
  const limiter = new LoginLimiter();
  const loginFailed = (detail: string) => new HttpError(problems.loginFailed, detail, { 'WWW-Authenticate': BASIC_CHALLENGE });

  const actions: SessionActions = {
    async checkPassword(req: IncomingMessage, user: string, password: string, now: number): Promise<LoginAttempt> {
      // Checked before scrypt runs: a limited guess costs the server nothing,
      // and the right password is refused too, so the limit cannot be probed.
      const key = loginLimitKey(clientAddress(req, config), user);
      const wait = limiter.attempt(key, now);
      if (wait !== undefined) return { wait };
      deps.accountsFile?.refresh();
      const account = await accounts.verify(user, password);
      if (!account) return { wrong: true };
      limiter.succeeded(key);
      return { account };
    },
    async revoke(req: IncomingMessage, now: number): Promise<void> {
      // Revoke on the server too: a saved copy of the cookie must stop working.
      const revoked = [...sessions.valid(req, now)].map((s) => ({ op: 'revoke' as const, sessionId: s.payload.sessionId, expiresAt: s.payload.expiresAt * 1000 }));
      if (revoked.length > 0) await store.commit(revoked);
    },
  };
  const browser = config.loginPage ? browserSignIn(deps, sessions, actions) : undefined;

  const routes: Route[] = [
    {
      method: 'GET',
      path: '/',
      handler: ({ req, res, now }) => {
        const session = sessions.current(req, res, now);
        if (browser === undefined) {
          sendRoot(res, session === undefined ? 401 : 200, session === undefined ? NOT_AUTHORIZED_BODY : OK_BODY);
          return;
        }
        // The answer now depends on Accept too (RFC 9110 section 12.5.5).
        const vary = 'Accept, Cookie';
        if (session !== undefined) sendRoot(res, 200, OK_BODY, vary);
        // SPEC.md "Authentication" 7: a browser without a session goes to the login page.
        else if (prefersHtml(header(req, 'accept'))) sendEmpty(res, 302, { Location: LOGIN_PATH, 'Cache-Control': 'no-store', Vary: vary });
        else sendRoot(res, 401, NOT_AUTHORIZED_BODY, vary);
      },
    },
    {
      method: 'POST',
      path: LOGIN_PATH,
      handler: async (ctx) => {
        const { req, res, now } = ctx;
        // A form without Authorization is the page's; anything with
        // Authorization (curl -u -d sends a form type too) is the API's.
        if (browser !== undefined && req.headers.authorization === undefined && isUrlEncodedForm(req.headers['content-type'])) return browser.login(ctx);
        await readBody(req, config.maxBody);
        const credentials = parseBasicAuth(req.headers.authorization);
        if (!credentials) throw loginFailed('Send Basic credentials: Authorization: Basic base64(user:password).');
        const attempt = await actions.checkPassword(req, credentials.user, credentials.password, now);
        if ('wait' in attempt) {
          throw new HttpError(problems.tooManyRequests, `Too many failed logins for this account from this address; try again in ${attempt.wait} s.`, { 'Retry-After': String(attempt.wait) });
        }
        if ('wrong' in attempt) throw loginFailed('The user name or password is wrong.');
        res.setHeader('Set-Cookie', sessions.open(attempt.account, now));
        sendRoot(res, 200, OK_BODY);
      },
    },
    {
      method: 'POST',
      path: LOGOUT_PATH,
      handler: async (ctx) => {
        if (browser !== undefined) return browser.logout(ctx);
        const { req, res, now } = ctx;
        await readBody(req, config.maxBody);
        await actions.revoke(req, now);
        sendEmpty(res, 204, { 'Set-Cookie': sessions.clearingCookie(), 'Cache-Control': 'no-store' });
      },
    },
  ];
  // Only with the flag: without it GET /login stays a 405 (Allow: POST, OPTIONS).
  if (browser !== undefined) routes.splice(1, 0, { method: 'GET', path: LOGIN_PATH, handler: browser.show });
  return routes;
}
