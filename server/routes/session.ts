import type { ServerResponse } from 'node:http';
import { LOGIN_PATH, LOGOUT_PATH } from '../../shared/paths.js';
import { problems } from '../../shared/problems.js';
import { parseBasicAuth } from '../accounts.js';
import type { AppDeps } from '../app.js';
import { clientAddress } from '../client-address.js';
import { HttpError } from '../errors.js';
import { readBody, sendEmpty } from '../http.js';
import { LoginLimiter, loginLimitKey } from '../login-limit.js';
import type { Route } from '../router.js';
import { COOKIE_CHALLENGE, type Sessions } from '../sessions.js';

// SPEC.md row 6 fixes these bodies: the JSON strings "OK" and "not authorized".
const OK_BODY = JSON.stringify('OK');
const NOT_AUTHORIZED_BODY = JSON.stringify('not authorized');
const BASIC_CHALLENGE = 'Basic realm="users"';

function sendRoot(res: ServerResponse, status: 200 | 401, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', body.length);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Vary', 'Cookie');
  if (status === 401) res.setHeader('WWW-Authenticate', COOKIE_CHALLENGE);
  res.end(body);
}

/** GET /, POST /login and POST /logout. */
export function sessionRoutes(deps: AppDeps, sessions: Sessions): Route[] {
  const { config, store, accounts } = deps;
  const limiter = new LoginLimiter();
  const loginFailed = (detail: string) => new HttpError(problems.loginFailed, detail, { 'WWW-Authenticate': BASIC_CHALLENGE });
  return [
    {
      method: 'GET',
      path: '/',
      handler: ({ req, res, now }) => {
        const session = sessions.current(req, res, now);
        sendRoot(res, session === undefined ? 401 : 200, session === undefined ? NOT_AUTHORIZED_BODY : OK_BODY);
      },
    },
    {
      method: 'POST',
      path: LOGIN_PATH,
      handler: async ({ req, res, now }) => {
        await readBody(req, config.maxBody);
        const credentials = parseBasicAuth(req.headers.authorization);
        if (!credentials) throw loginFailed('Send Basic credentials: Authorization: Basic base64(user:password).');
        // Checked before scrypt runs: a limited guess costs the server nothing,
        // and the right password is refused too, so the limit cannot be probed.
        const key = loginLimitKey(clientAddress(req, config), credentials.user);
        const wait = limiter.attempt(key, now);
        if (wait !== undefined) {
          throw new HttpError(problems.tooManyRequests, `Too many failed logins for this account from this address; try again in ${wait} s.`, { 'Retry-After': String(wait) });
        }
        deps.accountsFile?.refresh();
        const account = await accounts.verify(credentials.user, credentials.password);
        if (!account) throw loginFailed('The user name or password is wrong.');
        limiter.succeeded(key);
        res.setHeader('Set-Cookie', sessions.open(account, now));
        sendRoot(res, 200, OK_BODY);
      },
    },
    {
      method: 'POST',
      path: LOGOUT_PATH,
      handler: async ({ req, res, now }) => {
        await readBody(req, config.maxBody);
        // Revoke on the server too: a saved copy of the cookie must stop working.
        const revoked = [...sessions.valid(req, now)].map((s) => ({ op: 'revoke' as const, sessionId: s.payload.sessionId, expiresAt: s.payload.expiresAt * 1000 }));
        if (revoked.length > 0) await store.commit(revoked);
        sendEmpty(res, 204, { 'Set-Cookie': sessions.clearingCookie(), 'Cache-Control': 'no-store' });
      },
    },
  ];
}
