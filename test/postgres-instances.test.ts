/**
 * Several users-server instances on one PostgreSQL database, acting as one
 * service (issue 18): every sharing rule of API.md checked across three
 * instances, on the database and through pgbouncer, an instance killed
 * with SIGKILL under writes, the schema's versions, copy in both
 * directions, the PG* variables and the start-up without the driver. How
 * they meet faults (outages, cut and silent connections) is
 * test/postgres-faults.test.ts. Each test has a database of its own on this
 * process's throwaway cluster (test/postgres.ts); without PostgreSQL
 * binaries every test skips and says why.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { connect } from '../server/store/postgres/driver.js';
import { SCHEMA_VERSION } from '../server/store/postgres/schema.js';
import { PostgresSettings } from '../server/store/postgres/shared-settings.js';
import { loginLimitKey, SharedLoginLimits } from '../server/security/login-limit.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  basic,
  buildIfStale,
  cookiePair,
  put,
  runUsersServer,
  send,
  startTestServer,
  tempDir,
  type TestServer,
} from './helpers.js';
import { pgbouncerDatabase, pgbouncerSkipReason } from './pgbouncer.js';
import { postgresCluster, postgresSkipReason, testDatabase } from './postgres.js';
import { cleanEnv, spawnChild, spawnServer, spawnUsersServer } from './processes.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const skip = postgresSkipReason();
if (skip !== undefined) console.log(`# PostgreSQL instance tests skipped: ${skip}`);

/** A fresh database for a test: on the cluster, or through pgbouncer. */
type Database = (t: TestContext) => Promise<string>;

/** `count` in-process instances on one fresh database (`database`). */
async function instances(
  t: TestContext,
  count: number,
  overrides: Parameters<typeof startTestServer>[1] = {},
  database: Database = testDatabase,
): Promise<{ url: string; servers: TestServer[] }> {
  const url = await database(t);
  const servers: TestServer[] = [];
  for (let i = 0; i < count; i++) servers.push(await startTestServer(t, { store: url, ...overrides }));
  return { url, servers };
}

function pg(name: string, body: (t: TestContext) => Promise<void>): void {
  test(`PostgreSQL, several instances: ${name}`, async (t) => {
    if (skip !== undefined) return t.skip(skip);
    await body(t);
  });
}

const bouncerSkip = pgbouncerSkipReason();

/** A test of sharing rules, run on the database directly and again through pgbouncer in transaction pooling mode. */
function shared(name: string, body: (t: TestContext, database: Database) => Promise<void>): void {
  pg(name, (t) => body(t, testDatabase));
  test(`PostgreSQL through pgbouncer (transaction pooling), several instances: ${name}`, async (t) => {
    if (bouncerSkip !== undefined) return t.skip(bouncerSkip);
    await body(t, pgbouncerDatabase);
  });
}

shared('a session made on one instance is valid on all, and a logout on one revokes it on all', async (t, database) => {
  const { servers } = await instances(t, 3, {}, database);
  const cookie = await servers[0]!.login();
  for (const s of servers) assert.equal((await send(s.url, 'GET', '/', { headers: { cookie } })).status, 200, s.url);
  assert.equal((await send(servers[1]!.url, 'POST', '/logout', { headers: { cookie } })).status, 204);
  for (const s of servers) assert.equal((await send(s.url, 'GET', '/', { headers: { cookie } })).status, 401, s.url);
});

shared(
  'an API token made on one instance is valid on all, and its revocation on one is refused on all, also among requests checked together',
  async (t, database) => {
    const { servers } = await instances(t, 3, { requireSession: 'all' }, database);
    const cookie = await servers[0]!.login();
    const made = await send(servers[0]!.url, 'POST', '/tokens', {
      json: { name: 'shared', role: 'reader' },
      headers: { cookie },
    });
    assert.equal(made.status, 201, made.text);
    const { token, id } = made.json() as { token: string; id: string };
    const reads = (headers: Record<string, string>) =>
      Promise.all(servers.flatMap((s) => [1, 2, 3, 4].map(() => send(s.url, 'GET', '/users', { headers }))));
    // Four requests at once per instance: each instance gathers their checks into shared statements.
    for (const reply of await reads({ authorization: `Bearer ${token}` })) assert.equal(reply.status, 200, reply.text);
    assert.equal((await send(servers[2]!.url, 'DELETE', `/tokens/${id}`, { headers: { cookie } })).status, 204);
    const [refused, stillIn] = await Promise.all([reads({ authorization: `Bearer ${token}` }), reads({ cookie })]);
    for (const reply of refused) assertProblem(reply, 401, 'invalid-token');
    for (const reply of stillIn) assert.equal(reply.status, 200, reply.text);
  },
);

shared(
  'ids are unique and never reused across instances: 60 concurrent creates through three instances',
  async (t, database) => {
    const { servers } = await instances(t, 3, {}, database);
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const s = servers[i % 3]!;
        if (i % 3 === 0) return send(s.url, 'POST', '/users/new', { json: { name: `new-${i}` } });
        if (i % 3 === 1) return send(s.url, 'POST', '/reservations');
        return put(s.url, `/users/alias-${i}`, { name: `alias-${i}` });
      }),
    );
    const ids = replies.map((r) => {
      assert.equal(r.status, 201, r.text);
      return r.json().id as number;
    });
    assert.deepEqual(
      [...ids].sort((a, b) => a - b),
      Array.from({ length: 60 }, (_, i) => i + 1),
    );
    const user = replies[0]!.json().id as number;
    assert.equal((await send(servers[2]!.url, 'DELETE', `/users/${user}`)).status, 204);
    assertProblem(await put(servers[0]!.url, `/users/${user}`, { name: 'again' }), 410, 'gone');
    assertProblem(await send(servers[1]!.url, 'GET', `/users/${user}`), 404, 'not-found');
    assert.equal(
      (await send(servers[1]!.url, 'POST', '/users/new', { json: { name: 'next' } })).json().id,
      61,
      'the next id follows the highest, on any instance',
    );
  },
);

shared(
  'an Idempotency-Key replays on any instance, and the same key with another body is refused',
  async (t, database) => {
    const { servers } = await instances(t, 3, {}, database);
    const first = await send(servers[0]!.url, 'POST', '/users/new', {
      json: { name: 'Once' },
      headers: { 'idempotency-key': 'k-1' },
    });
    assert.equal(first.status, 201);
    for (const s of servers.slice(1)) {
      const replay = await send(s.url, 'POST', '/users/new', {
        json: { name: 'Once' },
        headers: { 'idempotency-key': 'k-1' },
      });
      assert.equal(replay.status, 201);
      assert.equal(replay.text, first.text);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
    }
    assertProblem(
      await send(servers[2]!.url, 'POST', '/users/new', {
        json: { name: 'Other' },
        headers: { 'idempotency-key': 'k-1' },
      }),
      422,
      'idempotency-key-reused',
    );
    // The same new key sent to three instances at once creates one user.
    const racing = await Promise.all(
      servers.map((s) =>
        send(s.url, 'POST', '/users/new', { json: { name: 'Race' }, headers: { 'idempotency-key': 'k-2' } }),
      ),
    );
    assert.equal(
      new Set(racing.filter((r) => r.status === 201).map((r) => r.text)).size,
      1,
      racing.map((r) => `${r.status} ${r.text}`).join(' | '),
    );
    const list = (await send(servers[0]!.url, 'GET', '/users')).json() as { items: { name: string }[] };
    assert.equal(list.items.filter((u) => u.name === 'Race').length, 1);
  },
);

shared('a write acknowledged by one instance is seen by the next read on any other', async (t, database) => {
  const { servers } = await instances(t, 3, {}, database);
  for (let i = 0; i < 10; i++) {
    const writer = servers[i % 3]!;
    const reader = servers[(i + 1) % 3]!;
    const written = await put(writer.url, '/users/shared', { name: 'Shared', version: i });
    assert.ok(written.status === 200 || written.status === 201, written.text);
    const read = await send(reader.url, 'GET', '/users/shared');
    assert.equal(read.json().version, i);
    assert.equal(
      read.headers.etag,
      (await send(writer.url, 'GET', '/users/shared')).headers.etag,
      'every instance gives the same ETag',
    );
  }
});

shared(
  'If-Match prevents lost updates between instances: clients incrementing one counter through three instances lose no increment',
  async (t, database) => {
    const { servers } = await instances(t, 3, {}, database);
    assert.equal((await put(servers[0]!.url, '/users/counter', { name: 'Counter', count: 0 })).status, 201);
    let written = 0;
    await Promise.all(
      Array.from({ length: 12 }, async (_, c) => {
        const s = servers[c % 3]!;
        for (let attempt = 0; attempt < 6; attempt++) {
          const read = await send(s.url, 'GET', '/users/counter');
          const count = (read.json() as { count: number }).count;
          const reply = await put(
            s.url,
            '/users/counter',
            { name: 'Counter', count: count + 1 },
            { 'if-match': read.headers.etag as string },
          );
          if (reply.status === 200) written++;
          else assert.equal(reply.status, 412, reply.text);
        }
      }),
    );
    assert.equal((await send(servers[1]!.url, 'GET', '/users/counter')).json().count, written);
  },
);

shared(
  'the failed-login limit holds across instances: guesses spread over three get no more tries than against one',
  async (t, database) => {
    const { servers } = await instances(t, 3, {}, database);
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++)
      statuses.push(
        (await send(servers[i % 3]!.url, 'POST', '/login', { headers: { authorization: basic('admin', 'wrong') } }))
          .status,
      );
    assert.deepEqual(statuses, [...Array<number>(10).fill(401), 429, 429]);
    const refused = await send(servers[1]!.url, 'POST', '/login', {
      headers: { authorization: basic('admin', ADMIN_PASSWORD) },
    });
    assert.equal(refused.status, 429, 'the right password is refused too while the limit holds');
  },
);

shared(
  'the failed-login limit across instances also holds per address over all names: 100 failures with made-up names spread over three, then every name is refused',
  async (t, database) => {
    const { servers } = await instances(t, 3, {}, database);
    for (let i = 0; i < 100; i++)
      assertProblem(
        await send(servers[i % 3]!.url, 'POST', '/login', { headers: { authorization: basic(`junk${i}`, 'wrong') } }),
        401,
        'login-failed',
        `failure ${i + 1}`,
      );
    const refused = await send(servers[1]!.url, 'POST', '/login', {
      headers: { authorization: basic('admin', ADMIN_PASSWORD) },
    });
    assertProblem(refused, 429, 'too-many-requests');
    assert.match(refused.json().detail, /^Too many failed logins from this address/);
  },
);

shared(
  'the shared failed-login limit: tries being checked fill the limit as busy, not as failures; a released try counts for nothing; a success forgets its own failures only',
  async (t, database) => {
    const { url } = await instances(t, 1, {}, database);
    const sql = await connect(url, { max: 1 });
    t.after(() => sql.end());
    const limits = new SharedLoginLimits(new PostgresSettings(sql));
    const now = Date.now();
    const slots = [];
    for (let i = 0; i < 10; i++) {
      const taken = await limits.take('192.0.2.1', 'bob', now);
      assert.ok('slot' in taken, `try ${i + 1}`);
      slots.push(taken.slot);
    }
    assert.deepEqual(await limits.take('192.0.2.1', 'bob', now), { busy: 1 });
    for (const slot of slots.splice(0, 9)) await slot.released();
    await slots[0]!.failed();
    const fail = async (account: string) => {
      const taken = await limits.take('192.0.2.1', account, now);
      if ('slot' in taken) await taken.slot.failed();
      return 'slot' in taken ? 'failed' : taken;
    };
    for (let i = 0; i < 9; i++) assert.equal(await fail('bob'), 'failed', `failure ${i + 2}`);
    assert.deepEqual(await fail('bob'), { wait: 60, scope: 'account' });
    assert.equal(await fail('carol'), 'failed');
    const carol = await limits.take('192.0.2.1', 'carol', now);
    assert.ok('slot' in carol);
    await carol.slot.succeeded();
    assert.deepEqual(await fail('bob'), { wait: 60, scope: 'account' }, "carol's success leaves bob's failures");
    const rows =
      await sql`select count(*)::int as n from login_attempts where key = ${loginLimitKey('192.0.2.1', 'carol')}`;
    assert.equal(rows[0]!.n, 0, "carol's failures are gone");
  },
);

shared(
  'the signing secret and the generated admin password are made once and shared; an account added by the command logs in on every instance',
  async (t, database) => {
    const url = await database(t);
    const noAdminPassword = { env: {} };
    const a = await startTestServer(t, { store: url }, noAdminPassword);
    const b = await startTestServer(t, { store: url }, noAdminPassword);
    for (const s of [a, b])
      assert.equal(
        s.running.adminPasswordFile,
        "the database (settings 'admin-password')",
        'every start says where the generated password is',
      );
    const sql = await connect(url, { max: 1 });
    t.after(() => sql.end());
    const [row] = await sql`select value from settings where name = 'admin-password'`;
    const cookie = cookiePair(
      (await send(a.url, 'POST', '/login', { headers: { authorization: basic('admin', row!.value as string) } }))
        .headers['set-cookie'],
    );
    assert.equal(
      (await send(b.url, 'GET', '/', { headers: { cookie } })).status,
      200,
      'a session signed by one verifies on the other',
    );
    const added = await runUsersServer(['accounts', 'add', 'rita', '--role', 'reader', '--store', url], {
      stdin: 'rita-password\n',
    });
    assert.equal(added.code, 0, added.stderr);
    for (const s of [a, b])
      assert.equal(
        (await send(s.url, 'POST', '/login', { headers: { authorization: basic('rita', 'rita-password') } })).status,
        200,
      );
    const listed = await runUsersServer(['accounts', 'list', '--json', '--store', url]);
    assert.deepEqual(
      (JSON.parse(listed.stdout) as { name: string }[]).map((r) => r.name),
      ['admin', 'rita'],
    );
  },
);

shared('a PUT to an old id of a moved user answers 301 on every instance', async (t, database) => {
  const { servers } = await instances(t, 2, { allowIdChange: true }, database);
  assert.equal((await put(servers[0]!.url, '/users/ann', { name: 'Ann' })).status, 201);
  assert.equal((await put(servers[0]!.url, '/users/1', { name: 'Ann', id: 50 })).status, 200);
  for (const s of servers) {
    const moved = await send(s.url, 'GET', '/users/1');
    assert.equal(moved.status, 301);
    assert.equal(moved.headers.location, '/users/50');
  }
});

shared(
  'an instance killed with SIGKILL under writes loses no acknowledged write; the others go on serving',
  async (t, database) => {
    const url = await database(t);
    const env = { USERS_STORE: url };
    const [a, b] = [await spawnServer(t, ['--port', '0'], { env }), await spawnServer(t, ['--port', '0'], { env })];
    const acknowledged: string[] = [];
    let writing = true;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; writing; i++) {
        const reply = await put(a.url, `/users/w${w}-${i}`, { name: `W${w} ${i}` }).catch(() => undefined);
        if (reply === undefined) return;
        if (reply.status === 201) acknowledged.push(reply.text);
      }
    });
    while (acknowledged.length < 50) await new Promise((resolve) => setImmediate(resolve));
    a.kill('SIGKILL');
    writing = false;
    await Promise.all(writers);
    assert.equal((await a.exited).signal, 'SIGKILL');
    const list = (await send(b.url, 'GET', '/users?limit=1000')).json() as { items: unknown[] };
    const stored = new Set(list.items.map((u) => JSON.stringify(u)));
    for (const text of acknowledged) assert.ok(stored.has(text), `${text} was acknowledged but is missing`);
    assert.equal((await put(b.url, '/users/after', { name: 'After' })).status, 201, 'the other instance still writes');
  },
);

pg(
  'users-server migrate creates the schema of an empty database, then finds nothing to do; a schema newer than this server knows is refused',
  async (t) => {
    const url = await testDatabase(t, { migrated: false });
    const first = await runUsersServer(['migrate', '--store', url]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, new RegExp(`applied schema version ${SCHEMA_VERSION} of ${SCHEMA_VERSION}`));
    const again = await runUsersServer(['migrate', '--store', url]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /nothing to do/);
    const sql = await connect(url, { max: 1 });
    await sql`insert into schema_migrations (version) values (${SCHEMA_VERSION + 1})`;
    await sql.end();
    const refused = await runUsersServer(['--port', '0', '--store', url]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      new RegExp(
        `^users-server: the database's schema is version ${SCHEMA_VERSION + 1}; this users-server knows versions up to ${SCHEMA_VERSION}: upgrade users-server\\n$`,
      ),
    );
  },
);

pg(
  'an empty database gets its schema at the first start, also when three instances start on it together',
  async (t) => {
    const url = await testDatabase(t, { migrated: false });
    const servers = await Promise.all([0, 1, 2].map(() => startTestServer(t, { store: url })));
    assert.equal((await put(servers[2]!.url, '/users/first', { name: 'First' })).status, 201);
    const sql = await connect(url, { max: 1 });
    t.after(() => sql.end());
    assert.deepEqual(
      (await sql`select version from schema_migrations order by version`).map((r) => r.version),
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
  },
);

test('PostgreSQL through pgbouncer: migrate with ?pool_mode=transaction creates the schema; without it a start exits 1 at once naming the parameter; pool_mode=statement is a usage error', async (t) => {
  if (bouncerSkip !== undefined) return t.skip(bouncerSkip);
  const url = new URL(await pgbouncerDatabase(t, { migrated: false }));
  const migrated = await runUsersServer(['migrate', '--store', url.toString()]);
  assert.equal(migrated.code, 0, migrated.stderr);
  assert.match(migrated.stdout, new RegExp(`schema version ${SCHEMA_VERSION} of ${SCHEMA_VERSION}`));
  url.searchParams.delete('pool_mode');
  const plain = await runUsersServer(['--port', '0', '--store', url.toString()]);
  assert.equal(plain.code, 1, plain.stderr);
  assert.match(
    plain.stderr,
    /^users-server: cannot use postgres:\/\/\S+: 08P01 unsupported startup parameter: \w+; behind pgbouncer in transaction pooling mode, add \?pool_mode=transaction to the store URL \(docs\/scaling\.md\)\n$/,
  );
  url.searchParams.set('pool_mode', 'statement');
  const statement = await runUsersServer(['migrate', '--store', url.toString()]);
  assert.equal(statement.code, 2, statement.stderr);
  assert.match(statement.stderr, /pool_mode=statement in the store URL: .*not statement mode/);
});

test('PostgreSQL: without the driver installed, --store postgres:// exits 2 with one line naming npm install postgres', async (t) => {
  const stale = buildIfStale();
  if (stale !== undefined) throw new Error(stale);
  // A copy of the executable with no node_modules beside it: the driver cannot be found.
  const copy = tempDir(t);
  for (const part of ['bin', 'dist']) cpSync(join(ROOT, part), join(copy, part), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(copy, 'package.json'));
  mkdirSync(join(copy, 'data'));
  const child = spawnChild(
    t,
    process.execPath,
    [join(copy, 'bin', 'users-server.js'), '--port', '0', '--store', 'postgres://app:pw@127.0.0.1:9/users'],
    { env: { ...cleanEnv(), USERS_ADMIN_PASSWORD: 'x' } },
  );
  const exit = await child.exited;
  assert.equal(exit.code, 2, child.stderr());
  assert.equal(
    child.stderr(),
    'users-server: the PostgreSQL store needs its driver, which is not installed: run `npm install postgres` next to users-server\n',
  );
  // The journal needs no driver.
  const journal = spawnUsersServer(t, ['--version']);
  assert.equal((await journal.exited).code, 0);
});

pg(
  'users-server copy moves a data directory into an empty database and back with everything: users, aliases, moves, reservations, keys, revocations, API tokens, accounts, secrets; cookies and tokens stay valid, and a watcher resumes with its last cursor',
  async (t) => {
    const dir = tempDir(t);
    const now = Date.now();
    const journal = await startTestServer(
      t,
      { store: 'journal', data: dir, allowIdChange: true },
      { env: {}, accounts: [{ name: 'rita', role: 'reader', password: 'rita-password' }] },
    );
    assert.equal((await put(journal.url, '/users/ann', { name: 'Ann' })).status, 201);
    assert.equal((await put(journal.url, '/users/1', { name: 'Ann', id: 7 })).status, 200);
    assert.equal((await put(journal.url, '/users/bob', { name: 'Bob' })).status, 201);
    assert.equal((await send(journal.url, 'DELETE', '/users/bob')).status, 204);
    const reserved = (await send(journal.url, 'POST', '/reservations')).json() as { id: number };
    const keyed = await send(journal.url, 'POST', '/users/new', {
      json: { name: 'Keyed' },
      headers: { 'idempotency-key': 'copy-key' },
    });
    const adminPassword = readFileSync(join(dir, 'admin-password'), 'utf8').trim();
    const login = (url: string) =>
      send(url, 'POST', '/login', { headers: { authorization: basic('admin', adminPassword) } });
    const cookie = cookiePair((await login(journal.url)).headers['set-cookie']);
    const revoked = cookiePair((await login(journal.url)).headers['set-cookie']);
    assert.equal((await send(journal.url, 'POST', '/logout', { headers: { cookie: revoked } })).status, 204);
    const made = await send(journal.url, 'POST', '/tokens', { json: { name: 'scraper' }, headers: { cookie } });
    assert.equal(made.status, 201, made.text);
    const bearer = { authorization: `Bearer ${made.json().token}` };
    const listing = (await send(journal.url, 'GET', '/users')).text;
    const changes = async (url: string, since: string | number) => {
      const reply = await send(url, 'GET', `/changes?since=${since}`);
      assert.equal(reply.status, 200, reply.text);
      return reply.text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { cursor: string; op: string; id: number });
    };
    const lastCursor = Number((await changes(journal.url, 0)).at(-1)!.cursor);
    await journal.running.stop();

    const url = await testDatabase(t, { migrated: false });
    const copied = await runUsersServer(['copy', '--from', dir, '--to', url]);
    assert.equal(copied.code, 0, copied.stderr);
    assert.match(
      copied.stdout,
      /^copied 2 users \(1 with an alias\), ids issued up to 7, 1 moved ids, 1 live reservations, 1 Idempotency-Key records, 1 revoked sessions, 1 API tokens, 1 accounts, 0 declared fields, no schema of the users' fields, 1 signing secrets, the generated admin password from /,
    );
    const db = await startTestServer(t, { store: url, allowIdChange: true }, { env: {} });
    assert.equal((await send(db.url, 'GET', '/users')).text, listing);
    assert.equal((await send(db.url, 'GET', '/users/ann')).json().id, 7);
    assert.equal((await send(db.url, 'GET', '/users/1')).status, 301);
    assertProblem(await put(db.url, '/users/2', { name: 'Bob again' }), 410, 'gone');
    assert.equal(
      (
        await send(db.url, 'POST', '/users/new', {
          json: { name: 'Keyed' },
          headers: { 'idempotency-key': 'copy-key' },
        })
      ).text,
      keyed.text,
    );
    assert.equal(
      (await send(db.url, 'GET', '/', { headers: { cookie } })).status,
      200,
      'a cookie of the journal server is still valid',
    );
    assert.equal(
      (await send(db.url, 'GET', '/', { headers: { cookie: revoked } })).status,
      401,
      'a revoked session stays revoked',
    );
    assert.equal(
      (await send(db.url, 'GET', '/', { headers: bearer })).status,
      200,
      'an API token of the journal server is still valid',
    );
    assert.equal(
      (await send(db.url, 'POST', '/login', { headers: { authorization: basic('rita', 'rita-password') } })).status,
      200,
    );
    assert.equal(
      (await put(db.url, `/users/${reserved.id}`, { name: 'Reserved' })).status,
      201,
      'the reservation is still live',
    );
    // The feed keeps its numbering, not its changes: the last cursor resumes, an older one is told so.
    assert.deepEqual(
      (await changes(db.url, lastCursor)).map((c) => [c.cursor, c.op, c.id]),
      [[String(lastCursor + 1), 'put', reserved.id]],
    );
    assertProblem(await send(db.url, 'GET', `/changes?since=${lastCursor - 1}`), 410, 'changes-expired');
    assert.ok(Date.now() - now < 300_000);

    for (const args of [[], ['--replace']]) {
      const live = await runUsersServer(['copy', '--from', dir, '--to', url, ...args]);
      assert.equal(live.code, 1, 'a copy into a database a server uses');
      assert.ok(live.stderr.includes(`is in use by 1 running users-server instance: ${db.url} on `), live.stderr);
    }
    const listingAfter = (await send(db.url, 'GET', '/users')).text;
    await db.running.stop();
    const refused = await runUsersServer(['copy', '--from', dir, '--to', url]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /is not empty .*pass --replace/);
    const back = tempDir(t);
    const returned = await runUsersServer(['copy', '--from', url, '--to', back]);
    assert.equal(returned.code, 0, returned.stderr);
    const again = await startTestServer(t, { store: 'journal', data: back, allowIdChange: true }, { env: {} });
    assert.equal((await send(again.url, 'GET', '/users')).text, listingAfter);
    assert.deepEqual(await changes(again.url, lastCursor + 1), [], 'and back: the last cursor resumes');
    assert.equal(
      (await send(again.url, 'GET', '/', { headers: { cookie } })).status,
      200,
      'and back: the cookie is still valid',
    );
    assert.equal(
      (await send(again.url, 'GET', '/', { headers: bearer })).status,
      200,
      'and back: the API token is still valid',
    );
    assert.equal(
      (await send(again.url, 'POST', '/login', { headers: { authorization: basic('admin', adminPassword) } })).status,
      200,
    );
  },
);

pg('--store postgres takes the PG* variables, and PGHOST may name the directory of a Unix socket', async (t) => {
  const url = new URL(await testDatabase(t));
  const cluster = await postgresCluster();
  const env = {
    PGHOST: cluster.dir,
    PGPORT: String(cluster.port),
    PGDATABASE: url.pathname.slice(1),
    PGUSER: decodeURIComponent(url.username),
  };
  const server = await spawnServer(t, ['--port', '0', '--store', 'postgres'], { env });
  assert.equal((await send(server.url, 'GET', '/readyz')).status, 200);
  assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
  // The same user, read through TCP: the socket led to this database.
  const sql = await connect(url.toString(), { max: 1 });
  t.after(() => sql.end());
  assert.deepEqual(
    (await sql`select alias from users`).map((r) => r.alias),
    ['ann'],
  );
});
