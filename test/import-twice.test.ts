/**
 * An operator's story, on the journal and on PostgreSQL (the servers and
 * usersctl in process; test/cli-bin.test.ts runs the binaries' import): export a server's users, import them into
 * another, restart
 * it, import the same file again. The second run leaves the target as the
 * first left it, for users with an alias and without one, whether either
 * run kept the ids or not. And plain lines
 * imported twice: the feed of changes has the first run's users once and
 * nothing of the second run, which changed nothing.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { Config } from '../server/ops/config.js';
import { usersctl as runUsersctl } from './cli-helpers.js';
import { put, send, startTestServer, tempDir } from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

const skipPostgres = postgresSkipReason();

function usersctl(t: TestContext, url: string, args: string[]) {
  return runUsersctl(['--url', url, ...args], { env: { HOME: tempDir(t) } });
}

async function restartable(t: TestContext, store: Partial<Config>) {
  let server = await startTestServer(t, store);
  return {
    url: server.url,
    async restart() {
      await server.running.stop();
      server = await startTestServer(t, store);
      return server.url;
    },
  };
}

/**
 * Exports a source (users with an alias and without, and a gap in the ids:
 * a user deleted), imports it into a target with the flags of `first`,
 * restarts the target, imports it again with those of `second`.
 */
async function importTwice(
  t: TestContext,
  target: Partial<Config>,
  first: string[] = [],
  second: string[] = [],
): Promise<void> {
  const source = await startTestServer(t, { data: tempDir(t) });
  assert.equal((await put(source.url, '/users/alice', { name: 'Alice' })).status, 201);
  for (const name of ['Bob', 'Gone', 'Carol'])
    assert.equal((await send(source.url, 'POST', '/users/new', { json: { name } })).status, 201);
  assert.equal((await send(source.url, 'DELETE', '/users/3')).status, 204);
  const file = join(tempDir(t), 'users.ndjson');
  const exported = await usersctl(t, source.url, ['export']);
  assert.equal(exported.code, 0, exported.stderr);
  writeFileSync(file, exported.stdout);

  const restarted = await restartable(t, target);
  const once = await usersctl(t, restarted.url, ['import', ...first, '-f', file]);
  assert.equal(once.code, 0, once.stderr);
  const listing = (await send(restarted.url, 'GET', '/users')).text;
  const url = await restarted.restart();
  const again = await usersctl(t, url, ['import', ...second, '-f', file]);
  assert.equal(again.code, 0, again.stderr);
  const results = again.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { action: string; id: number });
  assert.deepEqual(
    results.map((r) => r.action),
    ['unchanged', 'unchanged', 'unchanged'],
  );
  assert.equal((await send(url, 'GET', '/users')).text, listing, 'the second run changed the target');
  assert.equal(JSON.parse(listing).items.length, 3);
}

test('import of an export, run twice on a journal server restarted in between: the second run finds every user unchanged and adds none', async (t) => {
  await importTwice(t, { data: tempDir(t) });
});

test('import --keep-ids of an export, then a plain import of it on a journal server restarted in between: the second run finds every user unchanged, those without an alias too, and adds none', async (t) => {
  await importTwice(t, { data: tempDir(t) }, ['--keep-ids'], []);
});

test('a plain import of an export, then import --keep-ids of it on a journal server restarted in between: the second run finds every user unchanged under the alias the first gave it, and adds none', async (t) => {
  await importTwice(t, { data: tempDir(t) }, [], ['--keep-ids']);
});

test('import of an export, run twice on a PostgreSQL server restarted in between: the second run finds every user unchanged and adds none', async (t) => {
  if (skipPostgres !== undefined) return t.skip(skipPostgres);
  await importTwice(t, { store: await testDatabase(t) });
});

/** The lines of `usersctl watch --from-start --no-follow`: every change the server keeps. */
async function changesSoFar(t: TestContext, url: string): Promise<{ op: string; user?: { name: string } }[]> {
  const watched = await usersctl(t, url, ['watch', '--from-start', '--no-follow']);
  assert.equal(watched.code, 0, watched.stderr);
  return watched.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
}

async function linesTwiceWatched(t: TestContext, store: Partial<Config>): Promise<void> {
  const server = await startTestServer(t, store);
  const file = join(tempDir(t), 'people.ndjson');
  writeFileSync(file, '{"name":"Ann"}\n{"name":"Ben"}\n{"name":"Cy"}\n');
  for (const run of ['first', 'second']) {
    const imported = await usersctl(t, server.url, ['import', '-f', file]);
    assert.equal(imported.code, 0, `${run} run: ${imported.stderr}`);
  }
  // Lines go several at a time: the order of the creates is not the file's.
  const named = (changes: { op: string; user?: { name: string } }[]) =>
    changes.map((c) => `${c.op} ${c.user?.name}`).sort();
  assert.deepEqual(
    named(await changesSoFar(t, server.url)),
    ['put Ann', 'put Ben', 'put Cy'],
    'the second run is no change',
  );
  writeFileSync(file, '{"name":"Ann"}\n{"name":"Ben"}\n{"name":"Cy"}\n{"name":"Dee"}\n');
  assert.equal((await usersctl(t, server.url, ['import', '-f', file])).code, 0);
  assert.deepEqual(
    named((await changesSoFar(t, server.url)).slice(3)),
    ['put Dee'],
    'a third run with a line more: that line alone',
  );
}

test('plain lines imported twice on a journal server: usersctl watch shows each user once, and nothing of the second run', async (t) => {
  await linesTwiceWatched(t, { data: tempDir(t) });
});

test('plain lines imported twice on a PostgreSQL server: usersctl watch shows each user once, and nothing of the second run', async (t) => {
  if (skipPostgres !== undefined) return t.skip(skipPostgres);
  await linesTwiceWatched(t, { store: await testDatabase(t) });
});
