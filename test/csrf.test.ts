/**
 * Cross-site request forgery (issue 6): cookie-authenticated writes cannot
 * be forged from another site. A page on another site can make a browser
 * send only "simple" requests without asking first: GET, or POST with a
 * form's Content-Type (application/x-www-form-urlencoded,
 * multipart/form-data, text/plain). So:
 *
 * - the session cookie is `SameSite=Lax` (API.md "Sessions"): browsers do
 *   not attach it to a cross-site POST at all, and `HttpOnly`;
 * - a state-changing request that carries the session cookie and comes
 *   from another site (Sec-Fetch-Site: cross-site, or an Origin not the
 *   server's own) is refused 403 before anything else, whatever its body
 *   or Content-Type (issue 19);
 * - without those headers, a form-encoded POST /users/new is still refused
 *   415 (PUT rule 1 applies to POST /users/new too) and creates nothing;
 * - PUT and DELETE need a CORS preflight, which the server never grants.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signSession } from '../server/security/session-token.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  basic,
  cookiePair,
  listText,
  send,
  startTestServer,
  type Reply,
} from './helpers.js';

const EVIL = 'https://evil.example';
/** What a browser adds to a cross-site form submission. */
const CROSS_SITE = {
  origin: EVIL,
  referer: `${EVIL}/attack.html`,
  'sec-fetch-site': 'cross-site',
  'sec-fetch-mode': 'navigate',
  'sec-fetch-dest': 'document',
};

interface FormCase {
  name: string;
  contentType: string;
  body: string;
}

// The three encodings an HTML form can send (HTML "form submission algorithm").
const forms: FormCase[] = [
  {
    name: 'application/x-www-form-urlencoded',
    contentType: 'application/x-www-form-urlencoded',
    body: 'name=Mallory&role=admin',
  },
  {
    name: 'multipart/form-data',
    contentType: 'multipart/form-data; boundary=----x',
    body: '------x\r\nContent-Disposition: form-data; name="name"\r\n\r\nMallory\r\n------x--\r\n',
  },
  // The JSON-in-a-form trick: <form enctype="text/plain"> with an input named '{"name":"Mallory","x":"' and value '"}'.
  { name: 'text/plain carrying JSON', contentType: 'text/plain', body: '{"name":"Mallory","x":"="}' },
  {
    name: 'text/plain; charset=UTF-8 carrying JSON',
    contentType: 'text/plain; charset=UTF-8',
    body: '{"name":"Mallory"}',
  },
];

/** The attributes of a Set-Cookie value, names lower-cased. */
function attributes(setCookie: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const part of setCookie.split(';').slice(1)) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    map.set(name, eq === -1 ? '' : part.slice(eq + 1).trim());
  }
  return map;
}

function setCookies(reply: Reply): string[] {
  const value = reply.headers['set-cookie'];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

function assertLaxHttpOnly(setCookie: string, where: string, name = 'USER_TOKEN'): void {
  const attrs = attributes(setCookie);
  assert.ok(setCookie.startsWith(`${name}=`), `${where}: ${setCookie}`);
  assert.equal(attrs.get('samesite'), 'Lax', `${where}: SameSite=Lax in ${setCookie}`);
  assert.ok(attrs.has('httponly'), `${where}: HttpOnly in ${setCookie}`);
  assert.equal(attrs.get('path'), '/', `${where}: Path=/`);
  assert.ok(!attrs.has('domain'), `${where}: no Domain, so no other host gets it`);
}

for (const form of forms) {
  test(`CSRF: a cross-site POST /users/new sent as ${form.name} with the admin cookie answers 403 and creates nothing`, async (t) => {
    const server = await startTestServer(t, { requireSession: 'writes' });
    const cookie = await server.login();
    const before = await listText(server);
    const reply = await send(server.url, 'POST', '/users/new', {
      headers: { ...CROSS_SITE, cookie, 'content-type': form.contentType },
      body: form.body,
    });
    assertProblem(reply, 403, 'forbidden');
    assert.equal(await listText(server), before, 'nothing was created');
    // No id was used up either: the next create gets id 1.
    const created = await send(server.url, 'POST', '/users/new', { headers: { cookie }, json: { name: 'Real' } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.headers.location, '/users/1');
  });

  test(`CSRF: a cross-site PUT /users/{ref} sent as ${form.name} with the admin cookie answers 403 and changes nothing`, async (t) => {
    const server = await startTestServer(t, { requireSession: 'writes' });
    const cookie = await server.login();
    assert.equal(
      (await send(server.url, 'PUT', '/users/alice', { headers: { cookie }, json: { name: 'Alice' } })).status,
      201,
    );
    const before = await listText(server);
    for (const path of ['/users/1', '/users/alice', '/users/mallory']) {
      const reply = await send(server.url, 'PUT', path, {
        headers: { ...CROSS_SITE, cookie, 'content-type': form.contentType },
        body: form.body,
      });
      assertProblem(reply, 403, 'forbidden', path);
    }
    assert.equal(await listText(server), before);
  });
}

for (const type of [
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'text/plain;charset=UTF-8',
]) {
  test(`CSRF: a cross-site POST /reservations sent as ${type} with the admin cookie answers 403 and reserves nothing`, async (t) => {
    const server = await startTestServer(t, { requireSession: 'writes' });
    const cookie = await server.login();
    const reply = await send(server.url, 'POST', '/reservations', {
      headers: { ...CROSS_SITE, cookie, 'content-type': type },
      body: 'x=1',
    });
    assertProblem(reply, 403, 'forbidden');
    // The id a refused request would have taken is still the next one.
    const next = await send(server.url, 'POST', '/reservations', { headers: { cookie } });
    assert.equal(next.status, 201, next.text);
    assert.equal(next.json().id, 1);
  });
}

/** The headers of a request from a page of another site, one signal at a time. */
const SIGNALS: { name: string; headers: Record<string, string> }[] = [
  {
    name: 'Sec-Fetch-Site: cross-site and an Origin of another site',
    headers: { origin: EVIL, 'sec-fetch-site': 'cross-site' },
  },
  { name: 'Sec-Fetch-Site: cross-site alone', headers: { 'sec-fetch-site': 'cross-site' } },
  { name: 'an Origin of another site alone', headers: { origin: EVIL } },
  { name: 'an Origin of a sibling subdomain', headers: { origin: 'http://other.localhost' } },
  { name: 'Origin: null', headers: { origin: 'null' } },
];

for (const signal of SIGNALS) {
  test(`CSRF, default mode: with ${signal.name}, POST /logout, a body-less POST /reservations, PUT, DELETE and POST /users/new carrying the session cookie answer 403 and change nothing`, async (t) => {
    const server = await startTestServer(t);
    const cookie = await server.login();
    assert.equal((await send(server.url, 'PUT', '/users/alice', { json: { name: 'Alice' } })).status, 201);
    const before = await listText(server);
    const attempts: [string, string, Parameters<typeof send>[3]][] = [
      ['POST', '/logout', { headers: { ...signal.headers, cookie } }],
      ['POST', '/reservations', { headers: { ...signal.headers, cookie } }],
      ['PUT', '/users/1', { headers: { ...signal.headers, cookie }, json: { name: 'Mallory' } }],
      ['DELETE', '/users/alice', { headers: { ...signal.headers, cookie } }],
      ['POST', '/users/new', { headers: { ...signal.headers, cookie }, json: { name: 'Mallory' } }],
    ];
    for (const [method, path, options] of attempts)
      assertProblem(await send(server.url, method, path, options), 403, 'forbidden', `${method} ${path}`);
    assert.equal(await listText(server), before, 'no user changed');
    assert.equal(
      (await send(server.url, 'GET', '/', { headers: { cookie } })).status,
      200,
      'the session was not revoked',
    );
    const next = await send(server.url, 'POST', '/reservations', { headers: { cookie } });
    assert.equal(next.json().id, 2, 'no id was reserved by the refused requests');
  });
}

test('CSRF, default mode: a same-origin browser request with the cookie, a cross-site one without it, and GET from another site are served', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  const own = { origin: server.url, 'sec-fetch-site': 'same-origin' };
  assert.equal(
    (await send(server.url, 'PUT', '/users/alice', { headers: { ...own, cookie }, json: { name: 'Alice' } })).status,
    201,
  );
  assert.equal(
    (await send(server.url, 'POST', '/reservations', { headers: { ...CROSS_SITE } })).status,
    201,
    'no cookie: nothing to forge',
  );
  assert.equal((await send(server.url, 'GET', '/users/alice', { headers: { ...CROSS_SITE, cookie } })).status, 200);
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { ...own, cookie } })).status, 204);
});

test('CSRF: the session cookie of POST /login is SameSite=Lax, HttpOnly, Path=/, with no Domain', async (t) => {
  const server = await startTestServer(t);
  const login = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD) },
  });
  assert.equal(login.status, 200);
  const cookies = setCookies(login);
  assert.equal(cookies.length, 1);
  assertLaxHttpOnly(cookies[0]!, 'POST /login');
  assert.equal(attributes(cookies[0]!).get('max-age'), '43200');
  assert.ok(!attributes(cookies[0]!).has('secure'), 'Secure only with --cookie-secure');
});

test('CSRF: with --cookie-secure the session cookie is __Host-USER_TOKEN, Secure, Path=/, no Domain, and only that name is a session', async (t) => {
  const server = await startTestServer(t, { cookieSecure: true });
  const login = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD) },
  });
  const [cookie] = setCookies(login);
  assertLaxHttpOnly(cookie!, 'POST /login', '__Host-USER_TOKEN');
  assert.ok(attributes(cookie!).has('secure'), `Secure in ${cookie}`);
  const token = cookiePair(cookie!).slice('__Host-USER_TOKEN='.length);
  assert.equal((await send(server.url, 'GET', '/', { headers: { cookie: `__Host-USER_TOKEN=${token}` } })).status, 200);
  // A cookie without the prefix could have been set by a sibling subdomain: it is no session here.
  assert.equal((await send(server.url, 'GET', '/', { headers: { cookie: `USER_TOKEN=${token}` } })).status, 401);
  const root = await send(server.url, 'GET', '/');
  assert.match(String(root.headers['www-authenticate']), /cookie-name="__Host-USER_TOKEN"/);
  const logout = await send(server.url, 'POST', '/logout', { headers: { cookie: `__Host-USER_TOKEN=${token}` } });
  assertLaxHttpOnly(setCookies(logout)[0]!, 'POST /logout', '__Host-USER_TOKEN');
  assert.equal(
    (await send(server.url, 'GET', '/', { headers: { cookie: `__Host-USER_TOKEN=${token}` } })).status,
    401,
    'revoked',
  );
});

test('CSRF: the clearing cookie of POST /logout and a cookie re-issued after key rotation are SameSite=Lax and HttpOnly too', async (t) => {
  const current = 'c'.repeat(32);
  const old = 'o'.repeat(32);
  const server = await startTestServer(t, { secrets: [current, old] });
  const now = Math.floor(Date.now() / 1000);
  const stale = signSession(
    {
      account: 'admin',
      accountId: await server.adminAccountId(),
      sessionId: 'rotation-test',
      issuedAt: now,
      expiresAt: now + 600,
    },
    Buffer.from(old),
  );
  const root = await send(server.url, 'GET', '/', { headers: { cookie: `USER_TOKEN=${stale}` } });
  assert.equal(root.status, 200, 'a session signed by the older key passes');
  const [reissued] = setCookies(root);
  assert.ok(reissued !== undefined, 'and is re-issued');
  assertLaxHttpOnly(reissued, 'the re-issued cookie');
  const logout = await send(server.url, 'POST', '/logout', { headers: { cookie: cookiePair(reissued) } });
  assert.equal(logout.status, 204);
  const [clearing] = setCookies(logout);
  assertLaxHttpOnly(clearing!, 'POST /logout');
  assert.equal(attributes(clearing!).get('max-age'), '0');
});

test('CSRF: a CORS preflight from another site for PUT, DELETE or a JSON POST is not granted (no Access-Control-Allow-* field)', async (t) => {
  const server = await startTestServer(t, { requireSession: 'writes' });
  const requests = [
    { path: '/users/1', method: 'PUT', headers: 'content-type' },
    { path: '/users/1', method: 'DELETE', headers: '' },
    { path: '/users/new', method: 'POST', headers: 'content-type, idempotency-key' },
    { path: '/reservations', method: 'POST', headers: 'content-type' },
  ];
  for (const r of requests) {
    const headers: Record<string, string> = { origin: EVIL, 'access-control-request-method': r.method };
    if (r.headers !== '') headers['access-control-request-headers'] = r.headers;
    const preflight = await send(server.url, 'OPTIONS', r.path, { headers });
    const granted = Object.keys(preflight.headers).filter((name) => name.startsWith('access-control-'));
    assert.deepEqual(granted, [], `OPTIONS ${r.path} for ${r.method}: ${granted.join(', ')}`);
  }
});

test('CSRF: under --require-session writes, a cross-site form POST /users/new without the cookie (what SameSite=Lax makes a browser send) answers 401', async (t) => {
  const server = await startTestServer(t, { requireSession: 'writes' });
  const before = await listText(server);
  const reply = await send(server.url, 'POST', '/users/new', {
    headers: { ...CROSS_SITE, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'name=Mallory',
  });
  assertProblem(reply, 401, 'unauthorized');
  assert.equal(await listText(server), before);
});
