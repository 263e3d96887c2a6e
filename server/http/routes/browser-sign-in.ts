import type { IncomingMessage, ServerResponse } from 'node:http';
import { LOGIN_PATH } from '../../../shared/endpoints.js';
import { problems } from '../../../shared/problems.js';
import { HttpError } from '../../errors.js';
import type { Account } from '../../security/credentials.js';
import type { LoginRefusal } from '../../security/login-limit.js';
import {
  FORM_TOKEN_FIELD,
  FORM_TOKEN_TTL,
  isFormNonce,
  LOGIN_FORM_COOKIE,
  newFormNonce,
  sameNonce,
  signFormToken,
  verifyFormToken,
} from '../../security/form-token.js';
import { cookieValues, serializeCookie } from '../cookies.js';
import { isFormEncoding, isUrlEncodedForm } from '../media-type.js';
import { checkOrigin } from '../origin.js';
import { parseForm, readBody } from '../request.js';
import { sendEmpty } from '../response.js';
import type { Context, Handler, RouteDeps } from '../route.js';
import type { ActiveSession } from '../session-cookies.js';
import { sendLoginPage } from '../sign-in-html.js';

/**
 * What a password check came to: an account, a wait (the failed-login limit), busy (retry shortly), or a wrong
 * password.
 */
export type LoginAttempt = { account: Account } | LoginRefusal | { wrong: true };

/** What the page shares with the API's login and logout. */
export interface SessionActions {
  /** The failed-login limit and the password check. */
  checkPassword(req: IncomingMessage, user: string, password: string, now: number): Promise<LoginAttempt>;
  /** Revokes every valid session the request carries. */
  revoke(req: IncomingMessage, now: number): Promise<void>;
}

export interface BrowserSignIn {
  /** GET /login: the sign-in form, or the sign-out form for a browser with a session. */
  show: Handler;
  /** POST /login with a form body and no Authorization field. */
  login: Handler;
  /** POST /logout under --login-page. */
  logout: Handler;
}

const EXPIRED = 'The form expired; try again.';
const WRONG = 'The user name or password is wrong.';
const MISSING = 'Enter your user name and password.';
const NO_STORE = { 'Cache-Control': 'no-store' };

/**
 * The browser sign-in page of `--login-page` (docs/api.md "Browser
 * sign-in"). Every form carries a signed token (security/form-token.ts);
 * every refusal re-renders the page with a fresh one, so the form stays
 * usable.
 */
export function browserSignIn(deps: RouteDeps, actions: SessionActions): BrowserSignIn {
  const page = new SignInPage(deps, actions);
  return { show: (ctx) => page.show(ctx), login: (ctx) => page.login(ctx), logout: (ctx) => page.logout(ctx) };
}

type SignInExtra = { username?: string; error?: string; headers?: Record<string, string> };

class SignInPage {
  constructor(
    private readonly deps: RouteDeps,
    private readonly actions: SessionActions,
  ) {}

  async show({ req, res, now }: Context): Promise<void> {
    const session = await this.deps.sessions.current(req, res, now);
    if (session !== undefined) this.sendSignedIn(res, now, 200, session);
    else this.sendSignIn(req, res, now, 200);
  }

  async login({ req, res, now }: Context): Promise<void> {
    const form = parseForm(await readBody(req, this.deps.config.maxBody));
    // A forged form gets a clean page: nothing it sent is shown back.
    if (checkOrigin(req, this.deps.config) === 'cross' || !this.signInTokenValid(req, form, now)) {
      this.sendSignIn(req, res, now, 403, { error: EXPIRED });
      return;
    }
    const username = form.get('username') ?? '';
    const password = form.get('password') ?? '';
    // RFC 9110 section 15.5.2: a 401 carries a challenge. The Cookie scheme
    // names this form; browsers know no such scheme, so they show the page.
    const challenge = { 'WWW-Authenticate': this.deps.sessions.challenge };
    if (username === '' || password === '') {
      this.sendSignIn(req, res, now, 401, { username, error: MISSING, headers: challenge });
      return;
    }
    const attempt = await this.actions.checkPassword(req, username, password, now);
    if ('wait' in attempt) {
      this.sendSignIn(req, res, now, 429, {
        username,
        error: `Too many failed sign-ins; try again in ${attempt.wait} seconds.`,
        headers: { 'Retry-After': String(attempt.wait) },
      });
    } else if ('busy' in attempt) {
      this.sendSignIn(req, res, now, 503, {
        username,
        error: `The server is busy checking other sign-ins; try again in ${attempt.busy} seconds.`,
        headers: { 'Retry-After': String(attempt.busy) },
      });
    } else if ('wrong' in attempt) {
      this.sendSignIn(req, res, now, 401, { username, error: WRONG, headers: challenge });
    } else {
      // RFC 9110 section 15.4.4: 303 makes the browser GET / after the POST.
      res.setHeader('Set-Cookie', [
        this.deps.sessions.open(attempt.account, now),
        formNonceCookie('', 0, this.deps.config.cookieSecure),
      ]);
      sendEmpty(res, 303, { Location: '/', ...NO_STORE });
    }
  }

  async logout({ req, res, now }: Context): Promise<void> {
    const raw = await readBody(req, this.deps.config.maxBody);
    const crossOrigin = checkOrigin(req, this.deps.config) === 'cross';
    if (!isFormEncoding(req.headers['content-type'])) {
      // The API's logout (no body, JSON) as without --login-page, unless a
      // page of another origin sent it (a browser adds Origin to any POST).
      if (crossOrigin)
        throw new HttpError(problems.forbidden, 'A logout sent from a page of another origin is refused.');
      await this.actions.revoke(req, now);
      sendEmpty(res, 204, { 'Set-Cookie': this.deps.sessions.clearingCookie(), ...NO_STORE });
      return;
    }
    if (crossOrigin) return this.refuseSignOut(req, res, now);
    const first = (await this.deps.sessions.valid(req, now))[0];
    if (first !== undefined) {
      // The token is bound to the session the page showed: the first valid one.
      const form = isUrlEncodedForm(req.headers['content-type']) ? parseForm(raw) : new URLSearchParams();
      if (
        verifyFormToken(
          form.get(FORM_TOKEN_FIELD) ?? '',
          'logout-form',
          first.payload.sessionId,
          this.deps.keys,
          seconds(now),
        ) === undefined
      ) {
        return this.refuseSignOut(req, res, now);
      }
      await this.actions.revoke(req, now);
    }
    // Without a session there is nothing to protect: the cookie is cleared all the same.
    sendEmpty(res, 303, { Location: LOGIN_PATH, 'Set-Cookie': this.deps.sessions.clearingCookie(), ...NO_STORE });
  }

  /** 403 and the page again, with a fresh token: the sign-out form if the session is still there. */
  private async refuseSignOut(req: IncomingMessage, res: ServerResponse, now: number): Promise<void> {
    const session = await this.deps.sessions.current(req, res, now);
    if (session !== undefined) this.sendSignedIn(res, now, 403, session, EXPIRED);
    else this.sendSignIn(req, res, now, 403, { error: EXPIRED });
  }

  /** The sign-in form; its nonce cookie is kept if the browser has one, so two open tabs both work. */
  private sendSignIn(
    req: IncomingMessage,
    res: ServerResponse,
    now: number,
    status: number,
    extra: SignInExtra = {},
  ): void {
    const nonce = formNonces(req)[0] ?? newFormNonce();
    res.appendHeader('Set-Cookie', formNonceCookie(nonce, FORM_TOKEN_TTL, this.deps.config.cookieSecure));
    const token = signFormToken('login-form', '', nonce, seconds(now), this.deps.keys[0]!);
    sendLoginPage(
      res,
      status,
      {
        kind: 'sign-in',
        token,
        ...(extra.username !== undefined && { username: extra.username }),
        ...(extra.error !== undefined && { error: extra.error }),
      },
      extra.headers,
    );
  }

  private sendSignedIn(res: ServerResponse, now: number, status: number, session: ActiveSession, error?: string): void {
    const token = signFormToken(
      'logout-form',
      session.payload.sessionId,
      newFormNonce(),
      seconds(now),
      this.deps.keys[0]!,
    );
    sendLoginPage(res, status, {
      kind: 'signed-in',
      token,
      account: session.account.name,
      ...(error !== undefined && { error }),
    });
  }

  /** The double-submit check of the sign-in form: a fresh token whose nonce is in a LOGIN_FORM cookie. */
  private signInTokenValid(req: IncomingMessage, form: URLSearchParams, now: number): boolean {
    const nonce = verifyFormToken(form.get(FORM_TOKEN_FIELD) ?? '', 'login-form', '', this.deps.keys, seconds(now));
    return nonce !== undefined && formNonces(req).some((cookie) => sameNonce(cookie, nonce));
  }
}

function seconds(now: number): number {
  return Math.floor(now / 1000);
}

function formNonces(req: IncomingMessage): string[] {
  return cookieValues(req.headers.cookie, LOGIN_FORM_COOKIE).filter(isFormNonce);
}

/**
 * The Set-Cookie value of the sign-in form's nonce: only sent back to
 * /login, never on a cross-site request (SameSite=Strict), gone with the
 * form's freshness. `maxAge` 0 clears it.
 */
function formNonceCookie(nonce: string, maxAge: number, secure: boolean): string {
  return serializeCookie(LOGIN_FORM_COOKIE, nonce, { maxAge, secure, path: LOGIN_PATH, sameSite: 'Strict' });
}
