/**
 * PostgreSQL under faults, with one or several users-server instances: the
 * database stopped and started again under load, connections cut or gone
 * silent (in a transaction, while they open, at a start's first question,
 * part way through a copy), a database that cannot be reached, a start
 * stopped while it waits, an instance killed with SIGKILL while the
 * database restarts, a disk that fills up under a copy. Each test has a
 * database of its own on this process's throwaway cluster
 * (test/postgres.ts); without PostgreSQL binaries every test skips and
 * says why.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { againIfDropped, CONNECT_TIMEOUT_SECONDS, connect } from '../server/store/postgres/driver.js';
import { openPostgresStore } from '../server/store/postgres/open-postgres.js';
import {
  assertProblem,
  onSmallDisk,
  put,
  runUsersServer,
  send,
  startTestServer,
  tempDir,
  type TestServer,
} from './helpers.js';
import { cuttingRelay, postgresSkipReason, restartPostgres, setPostgresRunning, testDatabase } from './postgres.js';
import { spawnServer, spawnUsersctl, spawnUsersServer } from './processes.js';

const skip = postgresSkipReason();
if (skip !== undefined) console.log(`# PostgreSQL fault tests skipped: ${skip}`);

/** `count` in-process instances on one fresh database. */
async function instances(
  t: TestContext,
  count: number,
  overrides: Parameters<typeof startTestServer>[1] = {},
): Promise<{ url: string; servers: TestServer[] }> {
  const url = await testDatabase(t);
  const servers: TestServer[] = [];
  for (let i = 0; i < count; i++) servers.push(await startTestServer(t, { store: url, ...overrides }));
  return { url, servers };
}

/**
 * A server whose connections go through a cutting relay runs as a child: a
 * connection cut while it opens fails the driver's own query for the array
 * types, a promise the driver leaves unheard and the server heeds
 * (driver.ts), which in a test process node:test would count against
 * whichever test runs then.
 */
const RELAYED_SERVER = ['--port', '0', '--require-session', 'none'];

function pg(name: string, body: (t: TestContext) => Promise<void>): void {
  test(`PostgreSQL, several instances: ${name}`, async (t) => {
    if (skip !== undefined) return t.skip(skip);
    await body(t);
  });
}

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
  'a start whose first read of the declared fields outlasts --db-timeout (a busy database) reads them again and opens',
  async (t) => {
    const url = await testDatabase(t);
    await (await openPostgresStore(url, { log: () => {} })).close();
    const holder = await connect(url, { max: 1 });
    t.after(() => holder.end({ timeout: 1 }));
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked = () => {};
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    const holding = holder.begin(async (tx) => {
      await tx`lock table field_version in access exclusive mode`;
      locked();
      await released;
    });
    await lockTaken;
    const lines: string[] = [];
    const opening = openPostgresStore(url, {
      timeoutSeconds: 1,
      log: (line) => {
        lines.push(line);
        release();
      },
    });
    await holding;
    const store = await opening;
    t.after(() => store.close());
    assert.match(lines[0] ?? '', /reading the declared fields of .* again \(The database did not answer \(57014\)/);
  },
);

pg(
  'reads on connections that went silent (no answer, no close) answer 503 soon after --db-timeout, and the instance then reads through fresh connections',
  async (t) => {
    const relay = await cuttingRelay(t, await testDatabase(t));
    // One connection: the read after the silence cannot go to a connection opened since.
    const server = await spawnServer(t, [...RELAYED_SERVER, '--db-timeout', '1', '--db-pool', '1'], {
      env: { USERS_STORE: relay.url },
    });
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

/**
 * A `run` for againIfDropped that fails `times` times as an opening that outlasted the connect timeout, then answers.
 */
function slowOpenings(times: number): { run: () => Promise<string>; calls: () => number } {
  let calls = 0;
  const run = async () => {
    if (calls++ < times) throw Object.assign(new Error('write CONNECT_TIMEOUT'), { code: 'CONNECT_TIMEOUT' });
    return 'answered';
  };
  return { run, calls: () => calls };
}

test('againIfDropped: openings that outlast the connect timeout three times in a row are tried again while --db-timeout leaves room', async () => {
  const openings = slowOpenings(3);
  assert.equal(await againIfDropped(openings.run, 10, 5), 'answered');
  assert.equal(openings.calls(), 4);
});

test('againIfDropped: an opening that outlasts the connect timeout is not tried again when --db-timeout leaves no room for another', async () => {
  const openings = slowOpenings(1);
  await assert.rejects(againIfDropped(openings.run, 10, CONNECT_TIMEOUT_SECONDS), { code: 'CONNECT_TIMEOUT' });
  assert.equal(openings.calls(), 1);
});

pg(
  'a connection whose opening outlasts the connect timeout (a moment of load, or an event loop held past the timer) is tried again: the read and the write it carried succeed',
  async (t) => {
    const relay = await cuttingRelay(t, await testDatabase(t));
    const server = await spawnServer(t, RELAYED_SERVER, { env: { USERS_STORE: relay.url } });
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
