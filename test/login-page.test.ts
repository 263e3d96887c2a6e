/**
 * The browser sign-in page (`--login-page`, docs/api.md "Browser sign-in"),
 * over real sockets: the 302 from GET / for browsers (SPEC.md
 * "Authentication" 7), the page and its headers, the form login (303), its
 * CSRF defences (a signed token bound to the LOGIN_FORM cookie, and the
 * Origin check), the failed-login limit, the sign-out form (303) and its
 * CSRF defences, and that nothing changes without the flag.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { prefersHtml } from '../server/http/negotiation.js';
import { usage, type Config } from '../server/ops/config.js';
import { signFormToken } from '../server/security/form-token.js';
import type { StartOptions } from '../server/commands/serve.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  basic,
  cookiePair,
  send,
  startTestServer,
  type Reply,
  type TestServer,
} from './helpers.js';

const COOKIE_CHALLENGE = 'Cookie realm="users", cookie-name="USER_TOKEN", form-action="/login"';
const CHROME_ACCEPT =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7';
const FIREFOX_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
const EVIL = 'https://evil.example';
const EXPIRED = 'The form expired; try again.';
const T0 = 1_800_000_000_000;

function pageServer(t: TestContext, overrides: Partial<Config> = {}, options: StartOptions = {}): Promise<TestServer> {
  return startTestServer(t, { loginPage: true, ...overrides }, options);
}

/** A server whose clock the test moves. */
async function clockedServer(t: TestContext): Promise<{ server: TestServer; setNow(ms: number): void }> {
  let now = T0;
  const server = await pageServer(t, {}, { clock: () => now });
  return { server, setNow: (ms) => (now = ms) };
}

function setCookies(reply: Reply): string[] {
  const value = reply.headers['set-cookie'];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** The Set-Cookie value for `name`, if the reply sets it. */
function setCookie(reply: Reply, name: string): string | undefined {
  return setCookies(reply).find((c) => c.startsWith(`${name}=`));
}

/** The attributes of a Set-Cookie value, names lower-cased. */
function attributes(value: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const part of value.split(';').slice(1)) {
    const eq = part.indexOf('=');
    map.set((eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase(), eq === -1 ? '' : part.slice(eq + 1).trim());
  }
  return map;
}

/** The csrf field of the page, or undefined. */
function csrfOf(html: string): string | undefined {
  return /<input type="hidden" name="csrf" value="([^"]*)">/.exec(html)?.[1];
}

function alertOf(html: string): string | undefined {
  return /<p [^>]*role="alert"[^>]*>([^<]*)<\/p>/.exec(html)?.[1];
}

interface Form {
  reply: Reply;
  token: string;
  /** "LOGIN_FORM=nonce", or "" when the reply set no such cookie. */
  formCookie: string;
}

/** GET /login and what a browser keeps of it. */
async function getForm(url: string, cookie?: string): Promise<Form> {
  const reply = await send(url, 'GET', '/login', cookie === undefined ? {} : { headers: { cookie } });
  assert.equal(reply.status, 200, reply.text);
  const token = csrfOf(reply.text);
  assert.ok(token !== undefined, 'the page has a csrf field');
  const formCookie = setCookie(reply, 'LOGIN_FORM');
  return { reply, token, formCookie: formCookie === undefined ? '' : formCookie.split(';')[0]! };
}

/** A form submission: application/x-www-form-urlencoded, as a browser sends it. */
function postForm(
  url: string,
  path: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return send(url, 'POST', path, {
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

/** Signs in through the page as a browser would: GET the form, POST it back with its cookie. */
async function signIn(url: string, password = ADMIN_PASSWORD): Promise<Reply> {
  const form = await getForm(url);
  return postForm(
    url,
    '/login',
    { csrf: form.token, username: 'admin', password },
    { cookie: form.formCookie, origin: url },
  );
}

async function rootStatus(url: string, cookie: string): Promise<number> {
  return (await send(url, 'GET', '/', { headers: { cookie } })).status;
}

/** Asserts the answer is the page: HTML, the security headers, no caching. */
function assertPage(reply: Reply, status: number, where = ''): void {
  assert.equal(reply.status, status, `${where}: ${reply.text}`);
  assert.equal(reply.headers['content-type'], 'text/html; charset=utf-8', where);
  assert.equal(reply.headers['cache-control'], 'no-store', where);
  assert.equal(reply.headers['x-frame-options'], 'DENY', where);
  assert.equal(reply.headers['referrer-policy'], 'same-origin', where);
  assert.equal(reply.headers['x-content-type-options'], 'nosniff', where);
  assert.match(String(reply.headers['content-security-policy']), /default-src 'none'/, where);
}

/** Asserts a refused sign-in: 403, the page with the expiry message and a fresh form, no session. */
function assertSignInRefused(reply: Reply, where: string): void {
  assertPage(reply, 403, where);
  assert.equal(alertOf(reply.text), EXPIRED, `${where}: the error region`);
  assert.ok(csrfOf(reply.text) !== undefined, `${where}: a fresh token, so the form stays usable`);
  assert.match(reply.text, /name="password"/, `${where}: the sign-in form again`);
  assert.ok(setCookie(reply, 'LOGIN_FORM') !== undefined, `${where}: a LOGIN_FORM cookie for the fresh form`);
  assert.equal(setCookie(reply, 'USER_TOKEN'), undefined, `${where}: no session cookie`);
}

// ---------------------------------------------------------------- the 302 rule: content negotiation

interface AcceptCase {
  name: string;
  accept: string | undefined;
  html: boolean;
}

const acceptCases: AcceptCase[] = [
  { name: "Chrome's Accept", accept: CHROME_ACCEPT, html: true },
  { name: "Firefox's Accept (HTML at 1, */* at 0.8)", accept: FIREFOX_ACCEPT, html: true },
  { name: 'text/html alone', accept: 'text/html', html: true },
  { name: 'upper-case TEXT/HTML', accept: 'TEXT/HTML', html: true },
  {
    name: 'text/html;q=0.9 over application/json;q=0.8',
    accept: 'application/json;q=0.8, text/html;q=0.9',
    html: true,
  },
  { name: 'text/* at 0.5 over */* at 0.1', accept: 'text/*;q=0.5, */*;q=0.1', html: true },
  { name: 'text/html with application/json refused (q=0)', accept: 'text/html, application/json;q=0', html: true },
  { name: 'a media-type parameter before q', accept: 'text/html;level=1;q=0.7, application/json;q=0.6', html: true },
  { name: 'application/json', accept: 'application/json', html: false },
  { name: '*/*', accept: '*/*', html: false },
  { name: 'no Accept at all', accept: undefined, html: false },
  { name: 'text/html;q=0', accept: 'text/html;q=0', html: false },
  { name: 'text/html;q=0 beside */*', accept: 'text/html;q=0, */*', html: false },
  { name: 'application/json with text/html;q=0.5', accept: 'application/json, text/html;q=0.5', html: false },
  {
    name: 'a tie between text/html and application/json (JSON wins ties)',
    accept: 'text/html, application/json',
    html: false,
  },
  { name: 'application/* at 1 over text/html at 0.9', accept: 'application/*, text/html;q=0.9', html: false },
  { name: 'an invalid qvalue (q=abc), which drops the range', accept: 'text/html;q=abc', html: false },
  { name: 'a qvalue above 1 (q=1.5), which drops the range', accept: 'text/html;q=1.5', html: false },
  { name: 'a qvalue with four decimals (q=0.1234), which drops the range', accept: 'text/html;q=0.1234', html: false },
  { name: 'junk', accept: 'html, , ;q=1', html: false },
];

for (const c of acceptCases) {
  test(`Browser sign-in 302 rule: prefersHtml(${c.name}) is ${c.html}`, () => {
    assert.equal(prefersHtml(c.accept), c.html);
  });

  test(`Browser sign-in 302 rule: GET / without a session and with ${c.name} answers ${c.html ? '302 to /login' : 'the 401 "not authorized" of the contract'}, Vary: Accept, Cookie`, async (t) => {
    const server = await pageServer(t);
    const reply = await send(server.url, 'GET', '/', c.accept === undefined ? {} : { headers: { accept: c.accept } });
    assert.equal(reply.headers.vary, 'Accept, Cookie');
    assert.equal(reply.headers['cache-control'], 'no-store');
    if (c.html) {
      assert.equal(reply.status, 302, reply.text);
      assert.equal(reply.headers.location, '/login');
      assert.equal(reply.text, '');
    } else {
      assert.equal(reply.status, 401, reply.text);
      assert.equal(reply.text, '"not authorized"');
      assert.equal(reply.headers['content-type'], 'application/json');
      assert.equal(reply.headers['www-authenticate'], COOKIE_CHALLENGE);
      assert.equal(reply.headers.location, undefined);
    }
  });
}

test('Browser sign-in 302 rule: HEAD / with a browser Accept and no session answers 302 to /login without a body', async (t) => {
  const server = await pageServer(t);
  const reply = await send(server.url, 'HEAD', '/', { headers: { accept: CHROME_ACCEPT } });
  assert.equal(reply.status, 302);
  assert.equal(reply.headers.location, '/login');
  assert.equal(reply.headers.vary, 'Accept, Cookie');
  assert.equal(reply.text, '');
});

test('Browser sign-in 302 rule: GET / with a valid session and a browser Accept still answers 200 "OK" as JSON, Vary: Accept, Cookie', async (t) => {
  const server = await pageServer(t);
  const cookie = await server.login();
  const reply = await send(server.url, 'GET', '/', { headers: { accept: CHROME_ACCEPT, cookie } });
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '"OK"');
  assert.equal(reply.headers['content-type'], 'application/json');
  assert.equal(reply.headers.vary, 'Accept, Cookie');
});

test('Browser sign-in 302 rule: a USER_TOKEN the server did not sign is no session: a browser is sent to /login', async (t) => {
  const server = await pageServer(t);
  const reply = await send(server.url, 'GET', '/', {
    headers: { accept: CHROME_ACCEPT, cookie: 'USER_TOKEN=anything' },
  });
  assert.equal(reply.status, 302);
  assert.equal(reply.headers.location, '/login');
});

// ---------------------------------------------------------------- without the flag: nothing changes

/** The headers of a reply that do not differ between two identical requests. */
function stableHeaders(reply: Reply): Record<string, unknown> {
  const { date: _date, 'x-request-id': _id, ...rest } = reply.headers;
  return rest;
}

test('Without --login-page GET / with a browser Accept answers exactly what it answers without Accept: 401 "not authorized", Vary: Cookie', async (t) => {
  const server = await startTestServer(t);
  const browser = await send(server.url, 'GET', '/', { headers: { accept: CHROME_ACCEPT } });
  const api = await send(server.url, 'GET', '/');
  assert.equal(browser.status, 401);
  assert.equal(browser.text, '"not authorized"');
  assert.equal(browser.headers.vary, 'Cookie');
  assert.equal(browser.headers.location, undefined);
  assert.deepEqual(stableHeaders(browser), stableHeaders(api));
  assert.equal(browser.text, api.text);
});

test('Without --login-page GET /login and HEAD /login answer 405 with Allow: POST, OPTIONS, as before', async (t) => {
  const server = await startTestServer(t);
  for (const method of ['GET', 'HEAD']) {
    const reply = await send(server.url, method, '/login', { headers: { accept: CHROME_ACCEPT } });
    assert.equal(reply.status, 405, method);
    assert.equal(reply.headers.allow, 'POST, OPTIONS', method);
    if (method === 'GET') assertProblem(reply, 405, 'method-not-allowed');
  }
});

test('Without --login-page a form POST /login is the API login: 401 login-failed with the Basic challenge, no session', async (t) => {
  const server = await startTestServer(t);
  const reply = await postForm(
    server.url,
    '/login',
    { username: 'admin', password: ADMIN_PASSWORD },
    { origin: server.url },
  );
  assertProblem(reply, 401, 'login-failed');
  assert.equal(reply.headers['www-authenticate'], 'Basic realm="users"');
  assert.deepEqual(setCookies(reply), []);
});

test('Without --login-page /openapi.json has no GET /login; with it, GET /login is documented, routed, and the document still validates', async (t) => {
  const off = await startTestServer(t);
  const offDoc = (await send(off.url, 'GET', '/openapi.json')).json();
  assert.deepEqual(Object.keys(offDoc.paths['/login']), ['post']);
  const on = await pageServer(t);
  const onDoc = (await send(on.url, 'GET', '/openapi.json')).json();
  assert.deepEqual(Object.keys(onDoc.paths['/login']).sort(), ['get', 'post']);
  assert.ok(onDoc.paths['/login'].get.responses['200'].content['text/html'], 'GET /login is described as HTML');
  const validation = await new Validator().validate(onDoc);
  assert.equal(validation.valid, true, JSON.stringify(validation.errors, null, 2));
  const routed = on.running.app.routes.map((r) => `${r.method} ${r.path}`);
  assert.ok(routed.includes('GET /login'));
  const options = await send(on.url, 'OPTIONS', '/login');
  assert.equal(options.status, 204);
  assert.equal(options.headers.allow, 'GET, POST, HEAD, OPTIONS');
});

test('--help lists --login-page with USERS_LOGIN_PAGE', () => {
  assert.match(usage(), /^ {2}--login-page\b(?:(?!\n {2}--)[\s\S])*USERS_LOGIN_PAGE/m);
});

// ---------------------------------------------------------------- GET /login: the page

test('Browser sign-in page: GET /login answers 200 text/html; charset=utf-8 with no-store, a strict CSP, X-Frame-Options DENY, Referrer-Policy same-origin and nosniff', async (t) => {
  const server = await pageServer(t);
  const { reply } = await getForm(server.url);
  assertPage(reply, 200, 'GET /login');
  const csp = new Map(
    String(reply.headers['content-security-policy'])
      .split(';')
      .map((d) => {
        const [name, ...values] = d.trim().split(/\s+/);
        return [name!, values.join(' ')];
      }),
  );
  assert.equal(csp.get('default-src'), "'none'");
  assert.equal(csp.get('form-action'), "'self'");
  assert.equal(csp.get('frame-ancestors'), "'none'");
  // The style sheet is allowed by its hash: the hash must be the page's own style element.
  const style = /<style>([\s\S]*?)<\/style>/.exec(reply.text)?.[1];
  assert.ok(style !== undefined, 'an inline style sheet');
  assert.equal(csp.get('style-src'), `'sha256-${createHash('sha256').update(style).digest('base64')}'`);
  assert.ok(!csp.has('script-src'), 'no script allowed beyond default-src none');
});

test('Browser sign-in page: the markup is accessible: lang="en", a heading, a label for each input, autocomplete username and current-password', async (t) => {
  const server = await pageServer(t);
  const html = (await getForm(server.url)).reply.text;
  assert.match(html, /^<!doctype html>\n<html lang="en">/);
  assert.match(html, /<title>[^<]+<\/title>/);
  assert.match(html, /<h1>Sign in<\/h1>/);
  assert.match(html, /<form method="post" action="\/login">/);
  for (const [id, autocomplete, type] of [
    ['username', 'username', 'text'],
    ['password', 'current-password', 'password'],
  ] as const) {
    assert.match(html, new RegExp(`<label for="${id}">[^<]+</label>`), `a label for ${id}`);
    const input = new RegExp(`<input id="${id}" name="${id}"[^>]*>`).exec(html)?.[0];
    assert.ok(input !== undefined, `an input with id ${id}`);
    assert.match(input, new RegExp(`type="${type}"`));
    assert.match(input, new RegExp(`autocomplete="${autocomplete}"`));
    assert.match(input, / required/);
  }
  assert.match(html, /<button type="submit">Sign in<\/button>/);
  assert.equal(alertOf(html), undefined, 'no error region without an error');
});

test('Browser sign-in page: no external asset, no script: no src attribute, every href is a local path, no inline handler', async (t) => {
  const server = await pageServer(t);
  const html = (await getForm(server.url)).reply.text;
  assert.doesNotMatch(html, /<script/i);
  assert.doesNotMatch(html, /\ssrc=/i);
  assert.doesNotMatch(html, /\son[a-z]+=/i);
  assert.doesNotMatch(html, /<link/i);
  for (const [, href] of html.matchAll(/\s(?:href|action)="([^"]*)"/g))
    assert.match(href!, /^\/(?!\/)/, `local: ${href}`);
  assert.doesNotMatch(html, /url\(|@import/, 'the style sheet loads nothing');
});

test('Browser sign-in page: GET /login sets LOGIN_FORM (HttpOnly, SameSite=Strict, Path=/login, Max-Age=600) holding the nonce of the form token', async (t) => {
  const server = await pageServer(t);
  const { reply, token, formCookie } = await getForm(server.url);
  const value = setCookie(reply, 'LOGIN_FORM')!;
  const attrs = attributes(value);
  assert.ok(attrs.has('httponly'));
  assert.equal(attrs.get('samesite'), 'Strict');
  assert.equal(attrs.get('path'), '/login');
  assert.equal(attrs.get('max-age'), '600');
  assert.ok(!attrs.has('secure'), 'no Secure without --cookie-secure');
  assert.ok(!attrs.has('domain'));
  const nonce = formCookie.slice('LOGIN_FORM='.length);
  assert.match(nonce, /^[A-Za-z0-9_-]{22}$/);
  assert.equal(
    Buffer.from(token.split('.')[0]!, 'base64url').subarray(0, 16).toString('base64url'),
    nonce,
    "the token carries the cookie's nonce",
  );
  assert.equal(setCookie(reply, 'USER_TOKEN'), undefined);
});

test('Browser sign-in page: with --cookie-secure the LOGIN_FORM cookie is Secure', async (t) => {
  const server = await pageServer(t, { cookieSecure: true });
  const { reply } = await getForm(server.url);
  assert.ok(attributes(setCookie(reply, 'LOGIN_FORM')!).has('secure'));
});

test('Browser sign-in page: a browser that already holds a LOGIN_FORM keeps its nonce, so two open forms both work', async (t) => {
  const server = await pageServer(t);
  const first = await getForm(server.url);
  const second = await getForm(server.url, first.formCookie);
  assert.equal(second.formCookie, first.formCookie);
  for (const form of [first, second]) {
    const reply = await postForm(
      server.url,
      '/login',
      { csrf: form.token, username: 'admin', password: ADMIN_PASSWORD },
      { cookie: first.formCookie },
    );
    assert.equal(reply.status, 303, reply.text);
  }
});

test('Browser sign-in page: HEAD /login answers the headers of GET /login without a body', async (t) => {
  const server = await pageServer(t);
  const reply = await send(server.url, 'HEAD', '/login');
  assertPage(reply, 200, 'HEAD /login');
  assert.ok(Number(reply.headers['content-length']) > 0);
  assert.equal(reply.text, '');
});

// ---------------------------------------------------------------- POST /login: the form

test('Browser sign-in form: the right password answers 303 to / with the USER_TOKEN cookie of the Basic login, and clears LOGIN_FORM', async (t) => {
  const server = await pageServer(t);
  const reply = await signIn(server.url);
  assert.equal(reply.status, 303, reply.text);
  assert.equal(reply.headers.location, '/');
  assert.equal(reply.headers['cache-control'], 'no-store');
  const session = setCookie(reply, 'USER_TOKEN');
  assert.ok(session !== undefined, 'a session cookie');
  const basicLogin = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD) },
  });
  const attrsOf = (c: string) => [...attributes(c)].sort();
  assert.deepEqual(
    attrsOf(session),
    attrsOf(setCookie(basicLogin, 'USER_TOKEN')!),
    "the same attributes as the Basic login's cookie",
  );
  assert.equal(attributes(setCookie(reply, 'LOGIN_FORM')!).get('max-age'), '0');
  assert.equal(await rootStatus(server.url, cookiePair(session)), 200, 'the session passes GET /');
});

test('Browser sign-in form: a wrong password answers 401 with the page again, the error in role="alert", the Cookie challenge and no session', async (t) => {
  const server = await pageServer(t);
  const form = await getForm(server.url);
  const password = 'Wr0ng-pa55word-XYZ';
  const reply = await postForm(
    server.url,
    '/login',
    { csrf: form.token, username: 'admin', password },
    { cookie: form.formCookie, origin: server.url },
  );
  assertPage(reply, 401, 'wrong password');
  assert.equal(
    reply.headers['www-authenticate'],
    COOKIE_CHALLENGE,
    "a 401 carries a challenge; Basic would open the browser's own dialog",
  );
  assert.equal(alertOf(reply.text), 'The user name or password is wrong.');
  assert.ok(!reply.text.includes(password), 'the password is not echoed');
  assert.match(reply.text, /<input id="password" name="password" type="password"[^>]*>/);
  assert.doesNotMatch(/<input id="password"[^>]*>/.exec(reply.text)![0], /value=/, 'the password input is empty');
  assert.match(reply.text, /<input id="username" name="username"[^>]*value="admin"/, 'the user name is kept');
  assert.equal(setCookie(reply, 'USER_TOKEN'), undefined);
  // The form stays usable: its fresh token signs in.
  const retry = await postForm(
    server.url,
    '/login',
    { csrf: csrfOf(reply.text)!, username: 'admin', password: ADMIN_PASSWORD },
    { cookie: form.formCookie },
  );
  assert.equal(retry.status, 303, retry.text);
});

test('Browser sign-in form: an echoed user name is HTML-escaped', async (t) => {
  const server = await pageServer(t);
  const form = await getForm(server.url);
  const username = `<b>"x"&'</b>`;
  const reply = await postForm(
    server.url,
    '/login',
    { csrf: form.token, username, password: 'nope' },
    { cookie: form.formCookie },
  );
  assertPage(reply, 401, 'wrong user');
  assert.ok(!reply.text.includes('<b>'), 'no markup injected');
  assert.match(reply.text, /value="&lt;b&gt;&quot;x&quot;&amp;&#39;&lt;\/b&gt;"/);
});

test('Browser sign-in form: an empty user name or password answers 401 with the page and an error, and runs no check', async (t) => {
  const server = await pageServer(t);
  const form = await getForm(server.url);
  const cases: Record<string, string>[] = [{ username: '', password: 'x' }, { username: 'admin', password: '' }, {}];
  for (const fields of cases) {
    const reply = await postForm(server.url, '/login', { csrf: form.token, ...fields }, { cookie: form.formCookie });
    assertPage(reply, 401, JSON.stringify(fields));
    assert.equal(alertOf(reply.text), 'Enter your user name and password.');
    assert.equal(setCookie(reply, 'USER_TOKEN'), undefined);
  }
});

test('Browser sign-in form: a same-origin Origin is accepted', async (t) => {
  const server = await pageServer(t);
  const form = await getForm(server.url);
  const reply = await postForm(
    server.url,
    '/login',
    { csrf: form.token, username: 'admin', password: ADMIN_PASSWORD },
    { cookie: form.formCookie, origin: server.url },
  );
  assert.equal(reply.status, 303, reply.text);
});

test('Browser sign-in form: POST /login with Basic credentials stays the API login, even with a form body (curl -u -d): 200 "OK" as JSON', async (t) => {
  const server = await pageServer(t);
  const reply = await postForm(server.url, '/login', { a: 'b' }, { authorization: basic('admin', ADMIN_PASSWORD) });
  assert.equal(reply.status, 200, reply.text);
  assert.equal(reply.text, '"OK"');
  assert.equal(reply.headers['content-type'], 'application/json');
  assert.equal(reply.headers.vary, 'Cookie');
  assert.ok(setCookie(reply, 'USER_TOKEN') !== undefined);
  assertProblem(
    await postForm(server.url, '/login', {}, { authorization: basic('admin', 'wrong') }),
    401,
    'login-failed',
  );
  assertProblem(await send(server.url, 'POST', '/login'), 401, 'login-failed');
});

// ---------------------------------------------------------------- login CSRF: 403

interface CsrfCase {
  name: string;
  /** Builds the request from a fresh form (its token and cookie) and a second, unrelated one. */
  build(form: Form, other: Form, url: string): { fields: Record<string, string>; headers: Record<string, string> };
}

const right = { username: 'admin', password: ADMIN_PASSWORD };

const csrfCases: CsrfCase[] = [
  { name: 'no csrf field', build: (form) => ({ fields: { ...right }, headers: { cookie: form.formCookie } }) },
  {
    name: 'an empty csrf field',
    build: (form) => ({ fields: { csrf: '', ...right }, headers: { cookie: form.formCookie } }),
  },
  { name: 'no LOGIN_FORM cookie', build: (form) => ({ fields: { csrf: form.token, ...right }, headers: {} }) },
  {
    name: 'a LOGIN_FORM cookie of another form (mismatched nonce)',
    build: (form, other) => ({ fields: { csrf: form.token, ...right }, headers: { cookie: other.formCookie } }),
  },
  {
    name: "a token forged with another key for the cookie's nonce",
    build: (form) => {
      const nonce = form.formCookie.slice('LOGIN_FORM='.length);
      return {
        fields: {
          csrf: signFormToken('login-form', '', nonce, Math.floor(Date.now() / 1000), randomBytes(32)),
          ...right,
        },
        headers: { cookie: form.formCookie },
      };
    },
  },
  {
    name: 'a token with one signature character changed',
    build: (form) => {
      const last = form.token.at(-2) === 'A' ? 'B' : 'A';
      return {
        fields: { csrf: form.token.slice(0, -2) + last + form.token.slice(-1), ...right },
        headers: { cookie: form.formCookie },
      };
    },
  },
  {
    name: "a token whose nonce was swapped for another form's",
    build: (form, other) => ({
      fields: { csrf: other.token.split('.')[0] + '.' + form.token.split('.')[1], ...right },
      headers: { cookie: other.formCookie },
    }),
  },
  {
    name: 'a cross-site Origin with a valid token and cookie',
    build: (form) => ({ fields: { csrf: form.token, ...right }, headers: { cookie: form.formCookie, origin: EVIL } }),
  },
  {
    name: 'Origin: null with a valid token and cookie',
    build: (form) => ({ fields: { csrf: form.token, ...right }, headers: { cookie: form.formCookie, origin: 'null' } }),
  },
  {
    name: 'an Origin with the same host but https',
    build: (form, _o, url) => ({
      fields: { csrf: form.token, ...right },
      headers: { cookie: form.formCookie, origin: url.replace('http:', 'https:') },
    }),
  },
  {
    name: 'an Origin with the same host but another port',
    build: (form) => ({
      fields: { csrf: form.token, ...right },
      headers: { cookie: form.formCookie, origin: 'http://127.0.0.1:1' },
    }),
  },
];

for (const c of csrfCases) {
  test(`Login CSRF: a form login with ${c.name} answers 403 with the page ("${EXPIRED}") and a fresh token, and opens no session`, async (t) => {
    const server = await pageServer(t);
    const form = await getForm(server.url);
    const other = await getForm(server.url);
    const { fields, headers } = c.build(form, other, server.url);
    const reply = await postForm(server.url, '/login', fields, headers);
    assertSignInRefused(reply, c.name);
    assert.ok(!reply.text.includes('value="admin"'), 'nothing of a refused form is shown back');
  });
}

interface SchemeCase {
  name: string;
  overrides: Partial<Config>;
  headers: Record<string, string>;
  /** The scheme of the Origin sent. */
  scheme: 'http' | 'https';
  accepted: boolean;
}

const schemeCases: SchemeCase[] = [
  {
    name: "with --cookie-secure an https Origin is the server's own",
    overrides: { cookieSecure: true },
    headers: {},
    scheme: 'https',
    accepted: true,
  },
  {
    name: 'with --cookie-secure an http Origin is not',
    overrides: { cookieSecure: true },
    headers: {},
    scheme: 'http',
    accepted: false,
  },
  {
    name: 'with --trust-proxy the last X-Forwarded-Proto (https) gives the scheme',
    overrides: { trustProxy: true },
    headers: { 'x-forwarded-proto': 'http, https' },
    scheme: 'https',
    accepted: true,
  },
  {
    name: "with --trust-proxy and X-Forwarded-Proto https an http Origin is not the server's",
    overrides: { trustProxy: true },
    headers: { 'x-forwarded-proto': 'https' },
    scheme: 'http',
    accepted: false,
  },
  {
    name: 'without --trust-proxy X-Forwarded-Proto is not read',
    overrides: {},
    headers: { 'x-forwarded-proto': 'https' },
    scheme: 'https',
    accepted: false,
  },
];

for (const c of schemeCases) {
  test(`Login CSRF: the Origin check's scheme: ${c.name}`, async (t) => {
    const server = await pageServer(t, c.overrides);
    const form = await getForm(server.url);
    const origin = server.url.replace(/^http:/, `${c.scheme}:`);
    const reply = await postForm(
      server.url,
      '/login',
      { csrf: form.token, ...right },
      { cookie: form.formCookie, origin, ...c.headers },
    );
    if (c.accepted) assert.equal(reply.status, 303, reply.text);
    else assertSignInRefused(reply, c.name);
  });
}

test('Login CSRF: a form token is good for 600 seconds and refused at 601 (injected clock)', async (t) => {
  const { server, setNow } = await clockedServer(t);
  const form = await getForm(server.url);
  const submit = () => postForm(server.url, '/login', { csrf: form.token, ...right }, { cookie: form.formCookie });
  setNow(T0 + 601_000);
  assertSignInRefused(await submit(), 'after 601 s');
  setNow(T0 + 600_999);
  assert.equal((await submit()).status, 303, 'at 600 s it is still good');
});

test('Login CSRF: a token issued in the future (a clock set back) is refused', async (t) => {
  const { server, setNow } = await clockedServer(t);
  const form = await getForm(server.url);
  setNow(T0 - 5_000);
  assertSignInRefused(
    await postForm(server.url, '/login', { csrf: form.token, ...right }, { cookie: form.formCookie }),
    'issued later than now',
  );
});

test('Login CSRF: a sign-out token does not sign in', async (t) => {
  const server = await pageServer(t);
  const session = await server.login();
  const signedIn = await getForm(server.url, session);
  const form = await getForm(server.url);
  assertSignInRefused(
    await postForm(server.url, '/login', { csrf: signedIn.token, ...right }, { cookie: form.formCookie }),
    'a logout-form token',
  );
});

test('Login CSRF: refused form logins take no failed-login slot', async (t) => {
  const server = await pageServer(t);
  const form = await getForm(server.url);
  for (let i = 0; i < 12; i++) {
    assert.equal(
      (
        await postForm(
          server.url,
          '/login',
          { csrf: 'forged', username: 'admin', password: 'wrong' },
          { cookie: form.formCookie },
        )
      ).status,
      403,
    );
  }
  assert.equal((await signIn(server.url)).status, 303);
});

// ---------------------------------------------------------------- the failed-login limit

test('Browser sign-in form: the failed-login limit applies: the 11th attempt answers 429 with the page, the error and Retry-After, even with the right password', async (t) => {
  const server = await pageServer(t);
  const form = await getForm(server.url);
  const attempt = (password: string) =>
    postForm(server.url, '/login', { csrf: form.token, username: 'admin', password }, { cookie: form.formCookie });
  for (let i = 0; i < 10; i++) assert.equal((await attempt(`wrong-${i}`)).status, 401, `attempt ${i + 1}`);
  const reply = await attempt(ADMIN_PASSWORD);
  assertPage(reply, 429, 'limited');
  const retryAfter = Number(reply.headers['retry-after']);
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
    `Retry-After: ${reply.headers['retry-after']}`,
  );
  assert.match(
    alertOf(reply.text) ?? '',
    new RegExp(`^Too many failed sign-ins; try again in ${retryAfter} seconds\\.$`),
  );
  assert.ok(csrfOf(reply.text) !== undefined, 'the form is still there');
  assert.equal(setCookie(reply, 'USER_TOKEN'), undefined, 'no session');
  // One limit for the page and the API: the Basic login of that account is limited too.
  assertProblem(
    await send(server.url, 'POST', '/login', { headers: { authorization: basic('admin', ADMIN_PASSWORD) } }),
    429,
    'too-many-requests',
  );
});

// ---------------------------------------------------------------- sign-out

test('Browser sign-out: GET /login with a valid session shows "Signed in as admin" and a sign-out form to /logout, and no sign-in form', async (t) => {
  const server = await pageServer(t);
  const session = await server.login();
  const { reply } = await getForm(server.url, session);
  assertPage(reply, 200, 'signed in');
  assert.match(reply.text, /Signed in as <strong>admin<\/strong>/);
  assert.match(reply.text, /<form method="post" action="\/logout">/);
  assert.match(reply.text, /<button type="submit">Sign out<\/button>/);
  assert.doesNotMatch(reply.text, /name="password"/);
  assert.equal(setCookie(reply, 'LOGIN_FORM'), undefined, 'no sign-in nonce needed');
});

test('Browser sign-out: the form answers 303 to /login with the clearing cookie, and the session is revoked', async (t) => {
  const server = await pageServer(t);
  const session = cookiePair(setCookie(await signIn(server.url), 'USER_TOKEN'));
  const { token } = await getForm(server.url, session);
  const reply = await postForm(server.url, '/logout', { csrf: token }, { cookie: session, origin: server.url });
  assert.equal(reply.status, 303, reply.text);
  assert.equal(reply.headers.location, '/login');
  assert.equal(reply.headers['cache-control'], 'no-store');
  const cleared = setCookie(reply, 'USER_TOKEN');
  assert.ok(cleared !== undefined && cleared.startsWith('USER_TOKEN=;'), `clearing cookie: ${cleared}`);
  assert.equal(attributes(cleared).get('max-age'), '0');
  assert.equal(await rootStatus(server.url, session), 401, 'a saved copy of the cookie no longer passes GET /');
  const after = await send(server.url, 'GET', '/login', { headers: { cookie: session } });
  assert.match(after.text, /<h1>Sign in<\/h1>/, 'GET /login offers the sign-in form again');
});

test('Browser sign-out: a form sign-out without a session answers 303 to /login with the clearing cookie', async (t) => {
  const server = await pageServer(t);
  const reply = await postForm(server.url, '/logout', {}, { origin: server.url });
  assert.equal(reply.status, 303);
  assert.equal(reply.headers.location, '/login');
  assert.ok(setCookie(reply, 'USER_TOKEN')?.startsWith('USER_TOKEN=;'));
});

interface LogoutCase {
  name: string;
  contentType?: string;
  build(token: string, url: string, otherToken: string): { body: string; headers: Record<string, string> };
}

const logoutCases: LogoutCase[] = [
  {
    name: 'a cross-site Origin, with a valid token',
    build: (token) => ({ body: `csrf=${token}`, headers: { origin: EVIL } }),
  },
  {
    name: 'Origin: null, with a valid token',
    build: (token) => ({ body: `csrf=${token}`, headers: { origin: 'null' } }),
  },
  { name: 'no token', build: () => ({ body: '', headers: {} }) },
  {
    name: 'a forged token',
    build: () => ({
      body: `csrf=${signFormToken('logout-form', 'guess', randomBytes(16).toString('base64url'), Math.floor(Date.now() / 1000), randomBytes(32))}`,
      headers: {},
    }),
  },
  {
    name: 'the token of another session',
    build: (_t, _u, otherToken) => ({ body: `csrf=${otherToken}`, headers: {} }),
  },
  {
    name: 'a text/plain form (no Origin)',
    contentType: 'text/plain',
    build: (token) => ({ body: `csrf=${token}`, headers: {} }),
  },
  {
    name: 'a multipart/form-data form (no Origin)',
    contentType: 'multipart/form-data; boundary=x',
    build: (token) => ({
      body: `--x\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n${token}\r\n--x--\r\n`,
      headers: {},
    }),
  },
];

for (const c of logoutCases) {
  test(`Logout CSRF: a form sign-out with ${c.name} answers 403 with the page, and the session stays valid`, async (t) => {
    const server = await pageServer(t);
    const session = await server.login();
    const other = await server.login();
    const { token } = await getForm(server.url, session);
    const { token: otherToken } = await getForm(server.url, other);
    const { body, headers } = c.build(token, server.url, otherToken);
    const reply = await send(server.url, 'POST', '/logout', {
      headers: { 'content-type': c.contentType ?? 'application/x-www-form-urlencoded', cookie: session, ...headers },
      body,
    });
    assertPage(reply, 403, c.name);
    assert.equal(alertOf(reply.text), EXPIRED);
    assert.match(reply.text, /Signed in as <strong>admin<\/strong>/, 'the sign-out form again');
    assert.ok(csrfOf(reply.text) !== undefined && csrfOf(reply.text) !== token, 'with a fresh token');
    assert.equal(setCookie(reply, 'USER_TOKEN'), undefined, 'no clearing cookie');
    assert.equal(await rootStatus(server.url, session), 200, 'the session is still valid');
  });
}

test('Logout CSRF: a sign-out token is good for 600 seconds and refused at 601 (injected clock)', async (t) => {
  const { server, setNow } = await clockedServer(t);
  const session = await server.login();
  const { token } = await getForm(server.url, session);
  setNow(T0 + 601_000);
  const refused = await postForm(server.url, '/logout', { csrf: token }, { cookie: session });
  assertPage(refused, 403, 'expired sign-out form');
  assert.equal(await rootStatus(server.url, session), 200);
  const fresh = csrfOf(refused.text)!;
  assert.equal(
    (await postForm(server.url, '/logout', { csrf: fresh }, { cookie: session })).status,
    303,
    'the re-rendered form signs out',
  );
  assert.equal(await rootStatus(server.url, session), 401);
});

test('Logout CSRF: an API logout (no body) sent with a cross-site Origin answers 403 forbidden, and the session stays valid', async (t) => {
  const server = await pageServer(t);
  const session = await server.login();
  const reply = await send(server.url, 'POST', '/logout', { headers: { cookie: session, origin: EVIL } });
  assertProblem(reply, 403, 'forbidden');
  assert.equal(setCookie(reply, 'USER_TOKEN'), undefined);
  assert.equal(await rootStatus(server.url, session), 200);
});

for (const c of [
  { name: 'no body', options: {} },
  { name: 'a JSON body', options: { json: {} } },
  { name: 'a same-origin Origin', options: { headers: { origin: 'SELF' } } },
]) {
  test(`Browser sign-out: with --login-page the API logout with ${c.name} still answers 204 with the clearing cookie and revokes the session`, async (t) => {
    const server = await pageServer(t);
    const session = await server.login();
    const headers: Record<string, string> = { cookie: session };
    if ('headers' in c.options) headers.origin = server.url;
    const reply = await send(server.url, 'POST', '/logout', {
      headers,
      ...('json' in c.options && { json: c.options.json }),
    });
    assert.equal(reply.status, 204, reply.text);
    assert.equal(reply.text, '');
    assert.equal(reply.headers['cache-control'], 'no-store');
    assert.ok(setCookie(reply, 'USER_TOKEN')?.startsWith('USER_TOKEN=;'));
    assert.equal(await rootStatus(server.url, session), 401);
  });
}
