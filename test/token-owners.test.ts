/**
 * API tokens belong to an account (docs/api.md "API tokens"): a token acts
 * with the lesser of its role and its account's role now, stops working
 * when its account is removed, and cannot make a token with more rights
 * than it has; revoking a token revokes the tokens it made. Told as an
 * operator's story with the accounts command, on the journal and on
 * PostgreSQL.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { assertProblem, put, runUsersServer, send, startTestServer, tempDir, type TestServer } from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

interface Place {
  name: string;
  skip?: string;
  /** A server on a fresh store of this kind, and the flags of the accounts command for it. */
  start(t: TestContext, requireSession: 'none' | 'all'): Promise<{ server: TestServer; where: string[] }>;
}

const PLACES: Place[] = [
  {
    name: 'journal',
    start: async (t, requireSession) => {
      const data = tempDir(t);
      return { server: await startTestServer(t, { data, requireSession }), where: ['--data', data] };
    },
  },
  {
    name: 'postgres',
    ...(postgresSkipReason() !== undefined && { skip: postgresSkipReason() }),
    start: async (t, requireSession) => {
      const store = await testDatabase(t);
      return { server: await startTestServer(t, { store, requireSession }), where: ['--store', store] };
    },
  },
];

async function accounts(server: TestServer, args: string[], stdin = ''): Promise<void> {
  const reloaded = server.nextAccountsReload();
  const run = await runUsersServer(['accounts', ...args], { stdin });
  assert.equal(run.code, 0, run.stderr);
  await reloaded;
}

async function loginAs(server: TestServer, name: string, password: string): Promise<string> {
  return server.login(name, password);
}

async function tokenOf(
  url: string,
  credential: Record<string, string>,
  body: Record<string, unknown>,
): Promise<{ token: Record<string, string>; id: string }> {
  const made = await send(url, 'POST', '/tokens', { json: body, headers: credential });
  assert.equal(made.status, 201, made.text);
  return { token: { authorization: `Bearer ${made.json().token}` }, id: made.json().id };
}

for (const place of PLACES) {
  const options = place.skip === undefined ? {} : { skip: place.skip };

  test(
    `${place.name}: a token made by carol acts as reader once carol is a reader, and stops once carol is removed; a new carol does not revive it; the listing says so`,
    options,
    async (t) => {
      const { server, where } = await place.start(t, 'all');
      const url = server.url;
      await accounts(server, ['add', 'carol', '--role', 'admin', ...where], 'carol-password\n');
      const carol = { cookie: await loginAs(server, 'carol', 'carol-password') };
      const { token } = await tokenOf(url, carol, { name: 'carol-admin', role: 'admin' });
      const child = await tokenOf(url, token, { name: 'carol-child', role: 'admin' });
      assert.equal((await put(url, '/users/ann', { name: 'Ann' }, token)).status, 201);

      await accounts(server, ['role', 'carol', 'reader', ...where]);
      const refused = await put(url, '/users/ann', { name: 'Changed' }, token);
      assertProblem(refused, 403, 'forbidden');
      assert.match(
        refused.json().detail,
        /"carol-admin" has role admin, lowered to reader: its account "carol" has role reader/,
      );
      assertProblem(await send(url, 'POST', '/tokens', { json: { name: 'more' }, headers: token }), 403, 'forbidden');
      assert.equal((await send(url, 'GET', '/users/ann', { headers: token })).status, 200, 'it still reads');
      const admin = { cookie: await server.login() };
      const listed = (await send(url, 'GET', '/tokens', { headers: admin })).json().items;
      assert.deepEqual(
        listed.map((x: Record<string, unknown>) => [x.name, x.role, x.actsAs, x.createdBy]),
        [
          ['carol-admin', 'admin', 'reader', 'carol'],
          ['carol-child', 'admin', 'reader', 'carol'],
        ],
      );

      await accounts(server, ['remove', 'carol', ...where]);
      for (const credential of [token, child.token]) {
        const gone = await send(url, 'GET', '/users/ann', { headers: credential });
        assertProblem(gone, 401, 'invalid-token');
        assert.match(gone.json().detail, /belonged to the account "carol", which was removed/);
      }
      await accounts(server, ['add', 'carol', '--role', 'admin', ...where], 'carol-password\n');
      assertProblem(await send(url, 'GET', '/users/ann', { headers: token }), 401, 'invalid-token');
      const after = (await send(url, 'GET', '/tokens', { headers: admin })).json().items;
      assert.deepEqual(
        after.map((x: Record<string, unknown>) => x.actsAs),
        [null, null],
      );
      assert.equal((await send(url, 'GET', '/users/ann')).status, 401, 'nothing else opened meanwhile');
    },
  );

  test(
    `${place.name}: revoking a token revokes every token made with it, and theirs; a token cannot outlive the token that made it`,
    options,
    async (t) => {
      const { server } = await place.start(t, 'all');
      const url = server.url;
      const admin = { cookie: await server.login() };
      const first = await tokenOf(url, admin, { name: 'first', role: 'admin', expiresIn: 3600 });
      const second = await tokenOf(url, first.token, { name: 'second', role: 'admin' });
      const third = await tokenOf(url, second.token, { name: 'third', role: 'reader' });
      const listed = (await send(url, 'GET', '/tokens', { headers: admin })).json().items as Record<string, unknown>[];
      assert.deepEqual(
        listed.map((x) => [x.name, x.createdWith]),
        [
          ['first', null],
          ['second', first.id],
          ['third', second.id],
        ],
      );
      assert.equal(
        listed[1]!.expiresAt,
        listed[0]!.expiresAt,
        'without expiresIn it expires with the token that made it',
      );
      const longer = await send(url, 'POST', '/tokens', {
        json: { name: 'longer', expiresIn: 7200 },
        headers: first.token,
      });
      assertProblem(longer, 422, 'invalid-token-request');
      assert.match(
        longer.json().detail,
        /cannot outlive it: expiresIn at most (3\d{3}) \(usersctl tokens create --expires \1s\), or leave it out/,
      );

      const unrelated = await tokenOf(url, admin, { name: 'unrelated' });
      assert.equal((await send(url, 'DELETE', `/tokens/${first.id}`, { headers: admin })).status, 204);
      for (const made of [first, second, third])
        assertProblem(await send(url, 'GET', '/users', { headers: made.token }), 401, 'invalid-token');
      assert.equal((await send(url, 'GET', '/users', { headers: unrelated.token })).status, 200);
      assert.deepEqual(
        (await send(url, 'GET', '/tokens', { headers: admin }))
          .json()
          .items.map((x: Record<string, unknown>) => x.name),
        ['unrelated'],
      );
    },
  );

  test(
    `${place.name}: under --require-session none, a reader's token and a reader's session may still only read: a write is 403 and changes nothing`,
    options,
    async (t) => {
      const { server, where } = await place.start(t, 'none');
      const url = server.url;
      await accounts(server, ['add', 'rita', '--role', 'reader', ...where], 'rita-password\n');
      const admin = { cookie: await server.login() };
      const { token } = await tokenOf(url, admin, { name: 'scraper', role: 'reader' });
      const session = { cookie: await loginAs(server, 'rita', 'rita-password') };
      for (const credential of [token, session]) {
        assertProblem(await put(url, '/users/zed', { name: 'Zed' }, credential), 403, 'forbidden');
        assertProblem(
          await send(url, 'POST', '/users/new', { json: { name: 'Zed' }, headers: credential }),
          403,
          'forbidden',
        );
        assertProblem(await send(url, 'POST', '/reservations', { headers: credential }), 403, 'forbidden');
      }
      assert.equal((await send(url, 'GET', '/users')).json().items.length, 0, 'nothing was written');
      assert.equal(
        (await put(url, '/users/zed', { name: 'Zed' })).status,
        201,
        'without credentials the open mode lets it through',
      );
      assert.equal((await send(url, 'DELETE', '/users/zed', { headers: token })).status, 403);
      assert.equal((await send(url, 'GET', '/users/zed', { headers: token })).status, 200);
    },
  );
}
