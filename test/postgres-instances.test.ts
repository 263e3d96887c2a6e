/**
 * Several users-server instances on one PostgreSQL database, acting as one
 * service (issue 18): every sharing rule of API.md checked across three
 * instances, an instance killed with SIGKILL under writes, the database
 * stopped and started again under load, the schema's versions, and the
 * start-up without the database or without the driver. Each test has a
 * database of its own on this process's throwaway cluster (test/postgres.ts);
 * without PostgreSQL binaries every test skips and says why.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
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
  onSmallDisk,
  put,
  runUsersServer,
  send,
  startTestServer,
  tempDir,
  type TestServer,
} from './helpers.js';
import { pgbouncerDatabase, pgbouncerSkipReason } from './pgbouncer.js';
import {
  cuttingRelay,
  postgresCluster,
  postgresSkipReason,
  restartPostgres,
  setPostgresRunning,
  testDatabase,
} from './postgres.js';
import { cleanEnv, spawnChild, spawnServer, spawnUsersctl, spawnUsersServer } from './processes.js';

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
  'the database stopped under load: requests answer 503 store-unavailable with Retry-After, /readyz says why, and the instance recovers by itself when it is back',
  async (t) => {
    const { servers } = await instances(t, 1, {});
    const server = servers[0]!;
    assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
    assert.equal((await send(server.url, 'GET', '/readyz')).status, 200);
    await setPostgresRunning(false);
    t.after(() => setPostgresRunning(true));
    const during = await Promise.all([
      put(server.url, '/users/bob', { name: 'Bob' }),
      send(server.url, 'GET', '/users/ann'),
      send(server.url, 'POST', '/users/new', { json: { name: 'C' } }),
    ]);
    for (const reply of during) {
      assertProblem(reply, 503, 'store-unavailable');
      assert.equal(reply.headers['retry-after'], '1');
    }
    const ready = await send(server.url, 'GET', '/readyz');
    assertProblem(ready, 503, 'not-ready');
    assert.match(ready.json().detail as string, /database/);
    assert.equal((await send(server.url, 'GET', '/healthz')).status, 200, '/healthz stays a liveness probe');
    await setPostgresRunning(true);
    assert.equal((await send(server.url, 'GET', '/readyz')).status, 200, 'ready again without a restart');
    assert.equal((await put(server.url, '/users/bob', { name: 'Bob' })).status, 201);
    assert.equal((await send(server.url, 'GET', '/users/ann')).status, 200);
  },
);

pg(
  'node bin/users-server.js on a database that stops and starts again: its log says once that the database does not answer, however many requests meet the outage, and once that it answers again, without a request; usersctl watch started meanwhile waits it out and follows on',
  async (t) => {
    const url = await testDatabase(t);
    const server = await spawnServer(t, ['--port', '0', '--store', url, '--log-format', 'off']);
    assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
    await setPostgresRunning(false);
    t.after(() => setPostgresRunning(true));
    for (let i = 0; i < 5; i++) assertProblem(await send(server.url, 'GET', '/users/ann'), 503, 'store-unavailable');
    assertProblem(await put(server.url, '/users/bob', { name: 'Bob' }), 503, 'store-unavailable');
    const down = await server.waitForLine(
      /^users-server: (postgres:\/\/\S+) does not answer \((\w+)\): requests that need it are answered 503 until it does$/,
      'stderr',
    );
    assert.equal(down[1], url);
    const watcher = spawnUsersctl(t, ['watch', '--since', '1'], {
      env: { PATH: process.env.PATH, USERSCTL_URL: server.url, HOME: tempDir(t) },
    });
    await watcher.waitForLine(
      /^usersctl: the server answered 503: The database did not answer \(\w+\); retry shortly; connecting again in [\d.]+ s from cursor 1$/,
      'stderr',
    );
    await setPostgresRunning(true);
    await server.waitForLine(/^users-server: postgres:\/\/\S+ answers again, after \d+\.\d s out of reach$/, 'stderr');
    assert.equal((await send(server.url, 'GET', '/users/ann')).status, 200);
    assert.equal((await put(server.url, '/users/bob', { name: 'Bob' })).status, 201);
    await watcher.waitForLine(/"cursor":"2"/);
    watcher.kill('SIGINT');
    assert.equal((await watcher.exited).code, 130);
    assert.deepEqual(
      watcher
        .stdout()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).user.name),
      ['Bob'],
    );
    assert.equal(server.stderr().match(/does not answer/g)?.length, 1, server.stderr());
  },
);

pg(
  'a write whose connection to the database is cut inside its transaction answers 503 and the instance goes on: the next writes succeed; with every connection cut, reads answer 200 or 503, then all 200',
  async (t) => {
    const url = await testDatabase(t);
    const server = await startTestServer(t, { store: url });
    const admin = await connect(url, { max: 1 });
    // The PUT's transaction waits for its alias's lock, held here, until its backend is ended.
    const holder = await admin.reserve();
    t.after(async () => {
      holder.release();
      await admin.end();
    });
    await holder`begin`;
    await holder`select pg_advisory_xact_lock(hashtextextended('alias:cut', 0))`;
    const cut = put(server.url, '/users/cut', { name: 'Cut' });
    let waiting: { pid: number }[] = [];
    while (waiting.length === 0)
      waiting =
        await holder`select pid from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory'`;
    await holder`select pg_terminate_backend(${waiting[0]!.pid})`;
    assertProblem(await cut, 503, 'store-unavailable');
    await holder`rollback`;
    const after = await Promise.all([
      ...Array.from({ length: 12 }, (_, i) => put(server.url, `/users/after-${i}`, { name: `After ${i}` })),
      ...Array.from({ length: 12 }, (_, i) => send(server.url, 'POST', '/users/new', { json: { name: `New ${i}` } })),
      put(server.url, '/users/cut', { name: 'Cut' }),
    ]);
    assert.deepEqual(
      after.map((r) => r.status),
      after.map(() => 201),
      JSON.stringify(after.flatMap((r, i) => (r.status === 201 ? [] : [[i, r.text]]))),
    );
    // Every connection of the instance ended at once: a read that meets an ended one is tried again on
    // another (againIfDropped), and those the reconnecting pool still fails answer 503 with Retry-After.
    await holder`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'users-server' and pid <> pg_backend_pid()`;
    const reads = await Promise.all(
      Array.from({ length: 24 }, (_, i) => send(server.url, 'GET', `/users/after-${i % 12}`)),
    );
    for (const reply of reads) if (reply.status !== 200) assertProblem(reply, 503, 'store-unavailable');
    const again = await Promise.all(
      Array.from({ length: 24 }, (_, i) => send(server.url, 'GET', `/users/after-${i % 12}`)),
    );
    assert.deepEqual(
      again.map((r) => r.status),
      again.map(() => 200),
      JSON.stringify(again.flatMap((r) => (r.status === 200 ? [] : [r.text]))),
    );
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

test('PostgreSQL: a start that cannot reach the database retries for --db-start-wait seconds, then exits 1 with one line that shows no password', async () => {
  const run = await runUsersServer([
    '--port',
    '0',
    '--store',
    'postgres://app:very-secret@127.0.0.1:9/users',
    '--db-start-wait',
    '1',
  ]);
  assert.equal(run.code, 1);
  assert.ok(!run.stderr.includes('very-secret'), run.stderr);
  assert.match(
    run.stderr,
    /^users-server: cannot reach postgres:\/\/app:\*\*\*@127\.0\.0\.1:9\/users \(ECONNREFUSED\) in 1 s of waiting \(--db-start-wait\): check that PostgreSQL runs there and that the URL \(or PGHOST and PGPORT\) names it\n$/m,
  );
  assert.match(run.stderr, /waiting for postgres:\/\/app:\*\*\*@127\.0\.0\.1:9\/users \(ECONNREFUSED\), attempt 1/);
});

test('PostgreSQL: migrate, accounts and copy against a database that cannot be reached say so in one sentence with what to check, exit 1, no password shown', async () => {
  const url = 'postgres://app:very-secret@127.0.0.1:9/users';
  const sentence =
    'cannot reach postgres://app:***@127.0.0.1:9/users (ECONNREFUSED): check that PostgreSQL runs there and that the URL (or PGHOST and PGPORT) names it';
  for (const [args, prefix] of [
    [['migrate', '--store', url], 'users-server migrate'],
    [['accounts', 'list', '--store', url], 'users-server accounts'],
    [['copy', '--from', url, '--to', '/nonexistent/copy'], 'users-server copy'],
  ] as const) {
    const run = await runUsersServer(args);
    assert.deepEqual([run.code, run.stdout, run.stderr], [1, '', `${prefix}: ${sentence}\n`], args.join(' '));
  }
});

pg(
  'users-server copy from a database whose connection goes silent part way (a network that drops everything): it gives up after the statement timeout and a second, one sentence, exit 1, nothing written',
  async (t) => {
    const url = await testDatabase(t);
    const server = await startTestServer(t, { store: url });
    for (const name of ['ann', 'bob']) assert.equal((await put(server.url, `/users/${name}`, { name })).status, 201);
    await server.running.stop();
    const relay = await cuttingRelay(t, url);
    const silenced = relay.silenceOnce('from users order by id');
    const target = join(tempDir(t), 'copy');
    const started = performance.now();
    const run = await runUsersServer(['copy', '--from', relay.url, '--to', target]);
    await silenced;
    assert.deepEqual([run.code, run.stdout], [1, ''], run.stderr);
    assert.match(
      run.stderr,
      /^users-server copy: lost postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+ during the copy \((CONNECTION_CLOSED|DEADLINE_MISSED)\): nothing was changed; check that PostgreSQL runs there and the network to it, then copy again\n$/,
    );
    assert.ok(performance.now() - started >= 6000, 'not before the silence limit');
    assert.ok(!existsSync(target), 'no directory written');
  },
);

pg(
  'node bin/users-server.js on a database whose connection goes silent at its first question: the attempt ends after the statement timeout and a second, the next goes through a fresh connection, and the server serves',
  async (t) => {
    const url = await testDatabase(t);
    const relay = await cuttingRelay(t, url);
    const silenced = relay.silenceOnce("to_regclass('schema_migrations')");
    const server = spawnUsersServer(t, [
      '--port',
      '0',
      '--store',
      relay.url,
      '--db-timeout',
      '1',
      '--log-format',
      'off',
    ]);
    await silenced;
    await server.waitForLine(/^users-server: waiting for postgres:\/\/\S+ \(DEADLINE_MISSED\), attempt 1$/, 'stderr');
    const listening = await server.waitForLine(/^listening on (http:\/\/\S+)$/);
    assert.equal((await put(listening[1]!, '/users/ann', { name: 'Ann' })).status, 201);
  },
);

pg(
  'node bin/users-server.js on a database whose connection goes silent while the start reads the shared settings, or announces the instance: the start ends a second past the statement timeout with one sentence, exit 1, not waiting for ever',
  async (t) => {
    for (const [statement, doing] of [
      ['insert into secrets', 'reading its settings'],
      ['insert into instances', 'announcing this instance'],
    ] as const) {
      const url = await testDatabase(t);
      const relay = await cuttingRelay(t, url);
      const silenced = relay.silenceOnce(statement);
      const server = spawnUsersServer(t, [
        '--port',
        '0',
        '--store',
        relay.url,
        '--db-timeout',
        '1',
        '--log-format',
        'off',
      ]);
      await silenced;
      const started = performance.now();
      assert.deepEqual(await server.exited, { code: 1, signal: null }, server.stderr());
      assert.ok(performance.now() - started >= 1500, 'not before the statement timeout and a second');
      // The outage line, then the start's one sentence: no stack.
      assert.match(
        server.stderr(),
        new RegExp(
          `\\nusers-server: lost postgres://postgres@127\\.0\\.0\\.1:\\d+/\\w+ while ${doing} at the start \\(DEADLINE_MISSED\\): check that PostgreSQL runs there and the network to it, then start again\\n$`,
        ),
      );
      assert.doesNotMatch(server.stderr(), /\n\s+at /);
    }
  },
);

test('node bin/users-server.js: SIGINT or SIGTERM while the start waits for the database stops it at once, exit 0, with one line (not after --db-start-wait)', async (t) => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    // A wait of an hour: only the signal can end it within the test's time.
    const child = spawnUsersServer(t, [
      '--port',
      '0',
      '--store',
      'postgres://app@127.0.0.1:9/users',
      '--db-start-wait',
      '3600',
    ]);
    await child.waitForLine(
      /^users-server: waiting for postgres:\/\/app@127\.0\.0\.1:9\/users \(ECONNREFUSED\), attempt 1$/,
      'stderr',
    );
    child.kill(signal);
    assert.equal((await child.exited).code, 0, child.stderr());
    assert.match(child.stderr(), /\nusers-server: stopped before it served anything\n$/);
  }
});

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
      /^copied 2 users \(1 with an alias\), ids issued up to 7, 1 moved ids, 1 live reservations, 1 Idempotency-Key records, 1 revoked sessions, 1 API tokens, 1 accounts, 0 declared fields, 1 signing secrets, the generated admin password from /,
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

pg(
  'copy from a database onto a disk that fills up (a 1.5 MiB tmpfs, 1.6 MB of users): one sentence, exit 1, and the target as it was: gone when the copy made it, its own files back in place after --replace',
  async (t) => {
    const url = await testDatabase(t);
    const db = await startTestServer(t, { store: url, maxBody: 65_536 });
    for (let i = 0; i < 80; i++)
      assert.equal((await put(db.url, `/users/u${i}`, { name: `User ${i}`, pad: 'p'.repeat(20_000) })).status, 201);
    await db.running.stop();
    // Room for the 1 MiB a journal takes at its first write, not for the copy.
    await onSmallDisk(t, '1536k', async (disk) => {
      const made = await runUsersServer(['copy', '--from', url, '--to', join(disk, 'new')]);
      assert.deepEqual([made.code, made.stdout], [1, '']);
      assert.match(
        made.stderr,
        /^users-server copy: the copy failed, and what it had written was removed: no space left to write .*\/disk\/new; free some space\n$/,
      );
      assert.deepEqual(readdirSync(disk), []);
      // A data directory of its own on the small disk, replaced: it is whole again after the failure.
      const held = join(disk, 'held');
      const small = await startTestServer(t, { data: held });
      assert.equal((await put(small.url, '/users/kept', { name: 'Kept' })).status, 201);
      await small.running.stop();
      const before = readdirSync(held).sort();
      const replaced = await runUsersServer(['copy', '--from', url, '--to', held, '--replace']);
      assert.equal(replaced.code, 1, replaced.stderr);
      assert.match(
        replaced.stderr,
        /^users-server copy: the copy failed, and what it had written was removed: no space left to write /,
      );
      assert.deepEqual(readdirSync(held).sort(), before);
      const again = await startTestServer(t, { data: held });
      assert.deepEqual(
        (await send(again.url, 'GET', '/users')).json().items.map((u: { name: string }) => u.name),
        ['Kept'],
      );
    });
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

pg(
  "a connection cut while it opens, during the driver's own query for the array types, does not end the instance: the write that opened it succeeds",
  async (t) => {
    const relay = await cuttingRelay(t, await testDatabase(t));
    const server = await spawnServer(t, ['--port', '0'], { env: { USERS_STORE: relay.url } });
    assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
    for (const name of ['bob', 'cy', 'dee']) {
      // Every connection closed, so the write's transaction opens a new one; that one is cut as it
      // asks for the array types, which the driver (postgres 3.4.9) does for every new connection.
      relay.cutAll();
      const cut = relay.cutOnce('typcategory');
      const write = put(server.url, `/users/${name}`, { name });
      await cut;
      const reply = await write.catch((error: Error) =>
        assert.fail(`the write of ${name}: ${error.message}; the server said: ${server.stderr()}`),
      );
      assert.equal(reply.status, 201, `the write of ${name}: ${reply.text}`);
    }
    assert.equal((await send(server.url, 'GET', '/healthz')).status, 200);
    assert.equal((await send(server.url, 'GET', '/users/dee')).status, 200);
  },
);

pg(
  'a reserve that waits for a busy pool still gets a connection when the database ends the session it waited for',
  async (t) => {
    const url = await testDatabase(t);
    const sql = await connect(url, { max: 1 });
    const admin = await connect(url, { max: 1 });
    t.after(() => Promise.all([sql.end({ timeout: 1 }), admin.end()]));
    const busy = await sql.reserve();
    const [{ pid }] = (await busy`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
    // Waits in the driver's queue for the pool's one connection, which the database then ends: the
    // driver (postgres 3.4.9) hands the waiting reserve to that connection's reconnection, which drops it.
    const waiting = sql.reserve();
    await admin`select pg_terminate_backend(${pid})`;
    const reserved = await waiting;
    assert.equal((await reserved`select 1 as one`)[0]?.one, 1);
    reserved.release();
  },
);

pg(
  'reads on connections that went silent (no answer, no close) answer 503 soon after --db-timeout, and the instance then reads through fresh connections',
  async (t) => {
    const relay = await cuttingRelay(t, await testDatabase(t));
    const server = await startTestServer(t, { store: relay.url, dbTimeout: 1 });
    assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
    assert.equal((await send(server.url, 'GET', '/users/ann')).status, 200);
    relay.silence();
    // The read goes to a connection the database can no longer hear: neither the database's
    // statement timeout nor the driver's connect timeout can end it.
    assertProblem(await send(server.url, 'GET', '/users/ann'), 503, 'store-unavailable');
    assert.equal((await send(server.url, 'GET', '/users/ann')).status, 200);
    assert.equal((await put(server.url, '/users/bob', { name: 'Bob' })).status, 201);
    // The silent connections closed, so the server's stop need not wait for them (its pool's end timeout).
    relay.cutAll();
  },
);

pg(
  'a connection whose opening outlasts the connect timeout (a moment of load, or an event loop held past the timer) is tried once more: the read and the write it carried succeed',
  async (t) => {
    const relay = await cuttingRelay(t, await testDatabase(t));
    const server = await startTestServer(t, { store: relay.url });
    assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
    for (const request of [
      () => send(server.url, 'GET', '/users/ann'),
      () => put(server.url, '/users/bob', { name: 'Bob' }),
    ]) {
      relay.cutAll();
      // The next connection's startup message gets no answer: its opening ends at the connect timeout.
      const silenced = relay.silenceOnce('application_name');
      const answer = await request();
      await silenced;
      assert.ok(answer.status === 200 || answer.status === 201, `answered ${answer.status}`);
    }
    relay.cutAll();
  },
);

pg(
  'node bin/users-server.js, three instances: one killed with SIGKILL, the database restarted (pg_ctl restart -m fast) under load, every session terminated; the others serve again and stop on SIGTERM with exit 0',
  async (t) => {
    const url = await testDatabase(t);
    const servers = [];
    for (let i = 0; i < 3; i++)
      servers.push(await spawnServer(t, ['--port', '0', '--store', url, '--db-timeout', '2']));
    const [killed, ...alive] = servers as [(typeof servers)[0], ...typeof servers];
    killed.kill('SIGKILL');
    let loading = true;
    const answers: number[] = [];
    const loops = alive.flatMap((s) =>
      [0, 1, 2].map(async (n) => {
        for (let i = 0; loading; i++)
          answers.push(
            (await (i % 2 === 0 ? put(s.url, `/users/u${n}`, { name: `v${i}` }) : send(s.url, 'GET', `/users/u${n}`)))
              .status,
          );
      }),
    );
    const restarted = await restartPostgres();
    const admin = await connect(url, { max: 1 });
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'users-server' and pid <> pg_backend_pid()`;
    await admin.end();
    loading = false;
    await Promise.all(loops);
    assert.ok(
      answers.every((s) => [200, 201, 404, 503].includes(s)),
      `unexpected answers: ${[...new Set(answers)].join(', ')}`,
    );
    // Served again: a dead connection fails a write at most once per connection of the pool (503), then writes succeed.
    for (const s of alive) {
      let status = 503;
      for (let i = 0; i < 21 && status === 503; i++)
        status = (await put(s.url, '/users/after', { name: 'After' })).status;
      assert.ok(status === 200 || status === 201, `${s.url}: ${status}`);
    }
    const stops = await Promise.all(
      alive.map(async (s) => {
        const started = performance.now();
        s.kill('SIGTERM');
        const exit = await s.exited;
        return { exit, ms: performance.now() - started };
      }),
    );
    for (const { exit } of stops) assert.deepEqual(exit, { code: 0, signal: null });
    t.diagnostic(
      `restart took ${Math.round(restarted)} ms; ${answers.length} answers; SIGTERM to exit: ${stops.map((s) => Math.round(s.ms)).join(', ')} ms (bench/db-faults.ts measures these)`,
    );
  },
);
