/**
 * API tokens (docs/api.md "API tokens"): made by an admin with POST /tokens,
 * shown once, kept as a SHA-256, listed and revoked; accepted as
 * `Authorization: Bearer` wherever a session is, /metrics included; refused
 * with 401 `invalid-token` and `WWW-Authenticate: Bearer ... invalid_token`
 * when wrong, expired or revoked.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { RequireSession } from '../server/ops/config.js';
import { tokenHash } from '../server/security/api-token.js';
import { assertProblem, put, send, startTestServer, tempDir, type Reply, type TestServer } from './helpers.js';
import { runTool } from './processes.js';

const INVALID_TOKEN = 'Bearer realm="users", error="invalid_token"';
const GUARD_CHALLENGE = 'Cookie realm="users", cookie-name="USER_TOKEN", form-action="/login", Bearer realm="users"';
const TOKEN = /^ust_[0-9a-f]{16}\.[A-Za-z0-9_-]{43}$/;
const CURL = spawnSync('curl', ['--version']).status === 0;

interface Made {
  reply: Reply;
  token: string;
  id: string;
  bearer: Record<string, string>;
}

async function makeToken(server: TestServer, cookie: string, body: Record<string, unknown>): Promise<Made> {
  const reply = await send(server.url, 'POST', '/tokens', { json: body, headers: { cookie } });
  assert.equal(reply.status, 201, reply.text);
  const doc = reply.json() as { token: string; id: string };
  return { reply, token: doc.token, id: doc.id, bearer: { authorization: `Bearer ${doc.token}` } };
}

async function serverWithAdmin(
  t: TestContext,
  mode: RequireSession,
  extra: Parameters<typeof startTestServer>[2] = {},
) {
  const server = await startTestServer(t, { requireSession: mode }, extra);
  return { server, cookie: await server.login() };
}

function assertInvalidToken(reply: Reply, where: string): void {
  assertProblem(reply, 401, 'invalid-token', where);
  assert.equal(reply.headers['www-authenticate'], INVALID_TOKEN, `${where}: WWW-Authenticate`);
}

test('POST /tokens: an admin session makes a token: 201, Location, no-store, the token once (ust_<id>.<secret>), and the store keeps only its SHA-256', async (t) => {
  const dir = tempDir(t);
  const server = await startTestServer(t, { data: dir });
  const cookie = await server.login();
  const made = await makeToken(server, cookie, { name: 'ci', role: 'reader', expiresIn: 3600 });
  const doc = made.reply.json();
  assert.match(made.token, TOKEN);
  assert.equal(made.reply.headers.location, `/tokens/${made.id}`);
  assert.equal(made.reply.headers['cache-control'], 'no-store');
  assert.equal(made.token.slice(4, 20), made.id, "the id is the token's public part");
  assert.deepEqual(Object.keys(doc), [
    'id',
    'name',
    'role',
    'actsAs',
    'createdBy',
    'createdWith',
    'createdAt',
    'expiresAt',
    'expired',
    'token',
  ]);
  assert.equal(doc.createdBy, 'admin');
  assert.equal(doc.actsAs, 'reader');
  assert.equal(doc.createdWith, null);
  assert.equal(Date.parse(doc.expiresAt) - Date.parse(doc.createdAt), 3_600_000);
  const listed = await send(server.url, 'GET', '/tokens', { headers: { cookie } });
  assert.equal(listed.status, 200);
  assert.equal(listed.headers['cache-control'], 'no-store');
  const { token: _shownOnce, ...withoutSecret } = doc;
  assert.deepEqual(listed.json(), { items: [withoutSecret] });
  assert.ok(!listed.text.includes(made.token.slice(21)), 'the secret is never listed');
  const journal = readdirSync(dir)
    .filter((n) => n.startsWith('journal-'))
    .map((n) => readFileSync(join(dir, n), 'latin1'))
    .join('');
  assert.ok(!journal.includes(made.token.slice(21)), 'the secret is not in the journal');
  assert.ok(journal.includes(tokenHash(made.token)), 'its SHA-256 is');
});

for (const mode of ['none', 'writes', 'all'] as const) {
  test(`--require-session ${mode}: an admin token does what an admin session does (GET /, listing, PUT, DELETE, POST /users/new, POST /reservations, /metrics, POST /tokens)`, async (t) => {
    const { server, cookie } = await serverWithAdmin(t, mode);
    const { bearer } = await makeToken(server, cookie, { name: 'deploy', role: 'admin' });
    const url = server.url;
    assert.equal((await send(url, 'GET', '/', { headers: bearer })).text, '"OK"');
    assert.equal((await put(url, '/users/ann', { name: 'Ann' }, bearer)).status, 201);
    assert.equal((await send(url, 'GET', '/users', { headers: bearer })).json().items.length, 1);
    assert.equal((await send(url, 'GET', '/users/ann', { headers: bearer })).status, 200);
    assert.equal((await send(url, 'POST', '/users/new', { json: { name: 'Bob' }, headers: bearer })).status, 201);
    assert.equal((await send(url, 'POST', '/reservations', { headers: bearer })).status, 201);
    assert.equal((await send(url, 'DELETE', '/users/ann', { headers: bearer })).status, 204);
    assert.match((await send(url, 'GET', '/metrics', { headers: bearer })).text, /^users_server_users 1$/m);
    const child = await send(url, 'POST', '/tokens', { json: { name: 'made-by-token' }, headers: bearer });
    assert.equal(child.status, 201, child.text);
    assert.equal(child.json().createdBy, 'admin', 'a token made with a token belongs to the same account');
    assert.equal(child.json().createdWith, (await send(url, 'GET', '/tokens', { headers: bearer })).json().items[0].id);
  });
}

test('--require-session all: a reader token reads (listing, a user, /metrics) but a write is 403 forbidden and changes nothing; it may not make or list tokens', async (t) => {
  const { server, cookie } = await serverWithAdmin(t, 'all');
  const url = server.url;
  assert.equal((await put(url, '/users/ann', { name: 'Ann' }, { cookie })).status, 201);
  const { bearer } = await makeToken(server, cookie, { name: 'scraper' });
  assert.equal((await send(url, 'GET', '/users/ann', { headers: bearer })).status, 200);
  assert.equal((await send(url, 'GET', '/users', { headers: bearer })).status, 200);
  assert.equal((await send(url, 'GET', '/metrics', { headers: bearer })).status, 200);
  const refused = await put(url, '/users/ann', { name: 'Changed' }, bearer);
  assertProblem(refused, 403, 'forbidden');
  assert.match(refused.json().detail, /The API token "scraper" has role reader/);
  assert.equal((await send(url, 'GET', '/users/ann', { headers: { cookie } })).json().name, 'Ann');
  assertProblem(await send(url, 'POST', '/tokens', { json: { name: 'more' }, headers: bearer }), 403, 'forbidden');
  assertProblem(await send(url, 'GET', '/tokens', { headers: bearer }), 403, 'forbidden');
});

test('a wrong token is refused with 401 invalid-token and the Bearer challenge, in every mode, on /users, /metrics and /tokens; GET / answers its fixed 401 body with the Bearer challenge', async (t) => {
  const { server, cookie } = await serverWithAdmin(t, 'none');
  const url = server.url;
  const good = await makeToken(server, cookie, { name: 'good' });
  const wrongSecret = `${good.token.slice(0, 21)}${good.token.at(21) === 'A' ? 'B' : 'A'}${good.token.slice(22)}`;
  const cases: [string, string][] = [
    ['an unknown id', 'ust_0123456789abcdef.' + 'A'.repeat(43)],
    ['the right id with a wrong secret', wrongSecret],
    ['not a token of this server', 'eyJhbGciOiJIUzI1NiJ9.e30.sig'],
    ['an empty credential', ''],
  ];
  for (const [what, token] of cases) {
    const bearer = { authorization: `Bearer ${token}`.trim() };
    assertInvalidToken(await send(url, 'GET', '/users', { headers: bearer }), `${what}: GET /users in mode none`);
    assertInvalidToken(await put(url, '/users/x', { name: 'X' }, bearer), `${what}: PUT in mode none`);
    assertInvalidToken(await send(url, 'GET', '/metrics', { headers: bearer }), `${what}: /metrics`);
    assertInvalidToken(
      await send(url, 'GET', '/tokens', { headers: { ...bearer, cookie } }),
      `${what}: a bad token beside a good cookie`,
    );
    const root = await send(url, 'GET', '/', { headers: bearer });
    assert.equal(root.status, 401, what);
    assert.equal(root.text, '"not authorized"');
    assert.equal(root.headers['www-authenticate'], INVALID_TOKEN);
  }
  assert.equal(
    (await send(url, 'GET', '/users/x', { headers: { cookie } })).status,
    404,
    'no refused PUT created anything',
  );
  assert.equal(
    (await send(url, 'GET', '/users', { headers: { authorization: 'Basic YWRtaW46eA==' } })).status,
    200,
    'another scheme is not a token: mode none reads on',
  );
});

test('an expired token is refused (401 invalid-token naming its expiry), listed as expired; a revoked one is refused at once; DELETE /tokens/{id} answers 204, then 404', async (t) => {
  let now = Date.parse('2026-06-01T00:00:00Z');
  const { server, cookie } = await serverWithAdmin(t, 'all', { clock: () => now });
  const url = server.url;
  const short = await makeToken(server, cookie, { name: 'short', expiresIn: 60 });
  const long = await makeToken(server, cookie, { name: 'long' });
  assert.equal((await send(url, 'GET', '/users', { headers: short.bearer })).status, 200);
  now += 60_000;
  const expired = await send(url, 'GET', '/users', { headers: short.bearer });
  assertInvalidToken(expired, 'expired');
  assert.match(expired.json().detail, /"short" expired at 2026-06-01T00:01:00\.000Z/);
  assert.deepEqual(
    (await send(url, 'GET', '/tokens', { headers: { cookie } }))
      .json()
      .items.map((x: { name: string; expired: boolean }) => [x.name, x.expired]),
    [
      ['short', true],
      ['long', false],
    ],
  );
  assert.equal((await send(url, 'GET', '/users', { headers: long.bearer })).status, 200);
  assert.equal((await send(url, 'DELETE', `/tokens/${long.id}`, { headers: { cookie } })).status, 204);
  assertInvalidToken(await send(url, 'GET', '/users', { headers: long.bearer }), 'revoked');
  assertProblem(await send(url, 'DELETE', `/tokens/${long.id}`, { headers: { cookie } }), 404, 'not-found');
  assertProblem(await send(url, 'DELETE', '/tokens/not-an-id', { headers: { cookie } }), 404, 'not-found');
});

test('POST /tokens refuses a bad request without making a token: 401 without credentials (both challenges), 415, 400, 422 naming the field, 409 for a taken name, 413 for a large body', async (t) => {
  const { server, cookie } = await serverWithAdmin(t, 'none');
  const url = server.url;
  const noCredentials = await send(url, 'POST', '/tokens', { json: { name: 'x' } });
  assertProblem(noCredentials, 401, 'unauthorized');
  assert.equal(noCredentials.headers['www-authenticate'], GUARD_CHALLENGE);
  const headers = { cookie };
  assertProblem(
    await send(url, 'POST', '/tokens', { body: 'name=x', headers: { ...headers, 'content-type': 'text/plain' } }),
    415,
    'unsupported-media-type',
  );
  assertProblem(
    await send(url, 'POST', '/tokens', { body: '{', headers: { ...headers, 'content-type': 'application/json' } }),
    400,
    'invalid-json',
  );
  const fields: [unknown, string][] = [
    [[], ''],
    [{}, '/name'],
    [{ name: 'has space' }, '/name'],
    [{ name: 'x'.repeat(65) }, '/name'],
    [{ name: 'ok', role: 'root' }, '/role'],
    [{ name: 'ok', expiresIn: 0 }, '/expiresIn'],
    [{ name: 'ok', expiresIn: 1.5 }, '/expiresIn'],
    [{ name: 'ok', expiresIn: '90d' }, '/expiresIn'],
    [{ name: 'ok', scopes: [] }, '/scopes'],
  ];
  for (const [body, field] of fields) {
    const reply = await send(url, 'POST', '/tokens', { json: body, headers });
    assert.equal(assertProblem(reply, 422, 'invalid-token-request', JSON.stringify(body)).field, field);
  }
  await makeToken(server, cookie, { name: 'taken' });
  assertProblem(
    await send(url, 'POST', '/tokens', { json: { name: 'taken', role: 'admin' }, headers }),
    409,
    'token-name-taken',
  );
  assertProblem(
    await send(url, 'POST', '/tokens', { json: { name: 'big', pad: 'x'.repeat(5000) }, headers }),
    413,
    'payload-too-large',
  );
  assert.deepEqual(
    (await send(url, 'GET', '/tokens', { headers })).json().items.map((x: { name: string }) => x.name),
    ['taken'],
  );
});

test("a page of another site may not make a token with the admin's cookie (403), and a token is not a cookie: it needs no such check", async (t) => {
  const { server, cookie } = await serverWithAdmin(t, 'none');
  const refused = await send(server.url, 'POST', '/tokens', {
    json: { name: 'evil' },
    headers: { cookie, origin: 'https://evil.example' },
  });
  assertProblem(refused, 403, 'forbidden');
  assert.deepEqual((await send(server.url, 'GET', '/tokens', { headers: { cookie } })).json().items, []);
});

test('tokens survive a restart and a compaction (journal store): the token still works, a revoked one stays revoked', async (t) => {
  const dir = tempDir(t);
  const first = await startTestServer(t, { data: dir, requireSession: 'all', compactionFloor: 4096 });
  const cookie = await first.login();
  const kept = await makeToken(first, cookie, { name: 'kept', role: 'admin' });
  const revoked = await makeToken(first, cookie, { name: 'revoked' });
  assert.equal((await send(first.url, 'DELETE', `/tokens/${revoked.id}`, { headers: kept.bearer })).status, 204);
  for (let i = 0; readdirSync(dir).every((n) => !n.startsWith('snapshot-')); i++) {
    assert.ok(i < 500, 'no compaction');
    const reply = await put(first.url, `/users/u${i % 10}`, { name: 'x', pad: 'x'.repeat(300), i }, kept.bearer);
    assert.ok(reply.status === 200 || reply.status === 201, reply.text);
  }
  await first.running.stop();
  const again = await startTestServer(t, { data: dir, requireSession: 'all' });
  assert.equal((await send(again.url, 'GET', '/users', { headers: kept.bearer })).status, 200);
  assertInvalidToken(await send(again.url, 'GET', '/users', { headers: revoked.bearer }), 'revoked before the restart');
});

test('curl --oauth2-bearer, as a Prometheus scraper would: /metrics under --require-session all answers 200 with the token, 401 without', async (t) => {
  if (!CURL) return t.skip('curl not found');
  const { server, cookie } = await serverWithAdmin(t, 'all');
  const { token } = await makeToken(server, cookie, { name: 'prometheus' });
  const ok = await runTool(t, 'curl', [
    '-s',
    '-w',
    '\\n%{http_code}',
    '--oauth2-bearer',
    token,
    `${server.url}/metrics`,
  ]);
  assert.match(ok.stdout, /^# HELP users_server_requests_total/);
  assert.match(ok.stdout, /\n200$/);
  const refused = await runTool(t, 'curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', `${server.url}/metrics`]);
  assert.equal(refused.stdout, '401');
});
