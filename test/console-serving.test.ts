/**
 * The admin console as HTTP sees it (docs/console.md): the page at
 * /console with its Content-Security-Policy, its files under hashed names
 * cached for a year, 304s, no console with --no-console, GET
 * /console/session, and a failed API login answered to a page's script
 * without the Basic challenge that would open the browser's own dialog.
 * The browser walk is test/console.test.ts.
 */
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ADMIN_PASSWORD, AS_SHIPPED, assertProblem, basic, buildIfStale, send, startTestServer } from './helpers.js';

const DIST = fileURLToPath(new URL('../dist/console/', import.meta.url));

before(() => {
  const failed = buildIfStale();
  if (failed !== undefined) throw new Error(failed);
});

/** The files the page names: its script and style sheet. */
function assetsOf(page: string): string[] {
  return [...page.matchAll(/(?:src|href)="(console\/[^"]+)"/g)].map((m) => m[1]!);
}

test('GET /console is the page: HTML, revalidated on every load (no-cache and an ETag), a policy with no inline script and no framing, no other origin', async (t) => {
  const server = await startTestServer(t, AS_SHIPPED);
  const page = await send(server.url, 'GET', '/console');
  assert.equal(page.status, 200);
  assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(page.headers['cache-control'], 'no-cache');
  assert.match(String(page.headers.etag), /^"[\w-]+"$/);
  const csp = String(page.headers['content-security-policy']);
  for (const directive of [
    "default-src 'none'",
    "script-src 'self'",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
  ])
    assert.ok(csp.split('; ').includes(directive), `${directive} in ${csp}`);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
  assert.equal(page.headers['x-frame-options'], 'DENY');
  assert.equal(page.headers['x-content-type-options'], 'nosniff');
  assert.equal(page.headers['referrer-policy'], 'same-origin');
  assert.doesNotMatch(
    page.text,
    /<script>|<script [^>]*>[^<]|\son\w+=|https?:\/\//,
    'no inline script, no handler attribute, no other origin',
  );
  const again = await send(server.url, 'GET', '/console', { headers: { 'if-none-match': String(page.headers.etag) } });
  assert.equal(again.status, 304);
  assert.equal(again.text, '');
  assert.equal((await send(server.url, 'HEAD', '/console')).headers['content-length'], page.headers['content-length']);
});

test("the console's script and style sheet are served under names that hold their content's hash, cached for a year, and any other name is 404", async (t) => {
  const server = await startTestServer(t, AS_SHIPPED);
  const page = (await send(server.url, 'GET', '/console')).text;
  const assets = assetsOf(page);
  assert.deepEqual(
    assets.map((a) => a.replace(/\.[\w-]{12}\./, '.HASH.')),
    ['console/console.HASH.css', 'console/main.HASH.js'],
  );
  for (const asset of assets) {
    const reply = await send(server.url, 'GET', `/${asset}`);
    assert.equal(reply.status, 200, asset);
    assert.equal(reply.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.match(String(reply.headers['content-type']), asset.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
    assert.equal(reply.headers['x-content-type-options'], 'nosniff');
    const revalidated = await send(server.url, 'GET', `/${asset}`, {
      headers: { 'if-none-match': String(reply.headers.etag) },
    });
    assert.equal(revalidated.status, 304);
  }
  for (const path of ['/console/main.js', '/console/main.AAAAAAAAAAAA.js', '/console/index.html', '/console/..%2f'])
    assert.equal((await send(server.url, 'GET', path)).status, 404, path);
});

test('the console is small: its HTML, script and style sheet are at most 150 KB together, uncompressed', () => {
  const total = ['index.html', 'main.js', 'console.css'].reduce(
    (sum, file) => sum + statSync(join(DIST, file)).size,
    0,
  );
  assert.ok(total <= 150 * 1024, `${total} bytes`);
});

test('with --no-console, /console, its files and /console/session are 404, and the OpenAPI document has none of them', async (t) => {
  const server = await startTestServer(t, { ...AS_SHIPPED, noConsole: true });
  for (const path of ['/console', '/console/session', '/console/main.js'])
    assertProblem(await send(server.url, 'GET', path), 404, 'not-found', path);
  const paths = Object.keys((await send(server.url, 'GET', '/openapi.json')).json().paths as object);
  assert.deepEqual(
    paths.filter((p) => p.startsWith('/console')),
    [],
  );
});

test('GET /console/session names the account and its role: 401 without a session in every mode, then the admin and a reader', async (t) => {
  for (const requireSession of ['all', 'writes', 'none'] as const) {
    const server = await startTestServer(
      t,
      { requireSession },
      { accounts: [{ name: 'rita', role: 'reader', password: 'rita-password-long' }] },
    );
    const none = await send(server.url, 'GET', '/console/session');
    assertProblem(none, 401, 'unauthorized', requireSession);
    const admin = await send(server.url, 'GET', '/console/session', { headers: { cookie: await server.login() } });
    assert.deepEqual(admin.json(), { name: 'admin', account: 'admin', role: 'admin', via: 'session' });
    assert.equal(admin.headers['cache-control'], 'no-store');
    const reader = await send(server.url, 'GET', '/console/session', {
      headers: { cookie: await server.login('rita', 'rita-password-long') },
    });
    assert.deepEqual(reader.json(), { name: 'rita', account: 'rita', role: 'reader', via: 'session' });
  }
});

test("a failed API login from a page's script (Sec-Fetch-Mode: cors) is challenged with the cookie's scheme, not Basic, which would open the browser's password dialog; other clients still get Basic", async (t) => {
  const server = await startTestServer(t);
  const wrong = basic('admin', 'not-the-password');
  for (const mode of ['cors', 'same-origin']) {
    const reply = await send(server.url, 'POST', '/login', {
      headers: { authorization: wrong, 'sec-fetch-mode': mode, 'sec-fetch-site': 'same-origin' },
    });
    assertProblem(reply, 401, 'login-failed');
    assert.match(String(reply.headers['www-authenticate']), /^Cookie realm="users"/);
  }
  const others: Record<string, string>[] = [
    { authorization: wrong },
    { authorization: wrong, 'sec-fetch-mode': 'navigate' },
    {},
  ];
  for (const headers of others) {
    const reply = await send(server.url, 'POST', '/login', { headers });
    assert.equal(reply.headers['www-authenticate'], 'Basic realm="users"', JSON.stringify(headers));
  }
  const right = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD), 'sec-fetch-mode': 'cors' },
  });
  assert.equal(right.status, 200);
});
