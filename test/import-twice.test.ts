/**
 * An operator's story through the real binaries, on the journal and on
 * PostgreSQL: export a server's users, import them into another, restart
 * it, import the same file again. The second run leaves the target as the
 * first left it, for users with an alias and without one.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { put, send, tempDir } from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';
import { CLI_BIN, runTool, spawnServer } from './processes.js';

const skipPostgres = postgresSkipReason();

function usersctl(t: TestContext, url: string, args: string[]) {
  return runTool(t, process.execPath, [CLI_BIN, '--url', url, ...args], { env: { ...process.env, HOME: tempDir(t) } });
}

async function restartable(t: TestContext, args: string[]) {
  const server = await spawnServer(t, ['--port', '0', ...args]);
  return {
    url: server.url,
    async restart() {
      server.kill('SIGTERM');
      assert.equal((await server.exited).code, 0);
      return (await spawnServer(t, ['--port', '0', ...args])).url;
    },
  };
}

async function importTwice(t: TestContext, targetArgs: string[]): Promise<void> {
  const source = await spawnServer(t, ['--port', '0', '--data', tempDir(t)]);
  assert.equal((await put(source.url, '/users/alice', { name: 'Alice' })).status, 201);
  for (const name of ['Bob', 'Carol']) assert.equal((await send(source.url, 'POST', '/users/new', { json: { name } })).status, 201);
  const file = join(tempDir(t), 'users.ndjson');
  const exported = await usersctl(t, source.url, ['export']);
  assert.equal(exported.code, 0, exported.stderr);
  writeFileSync(file, exported.stdout);

  const target = await restartable(t, targetArgs);
  const first = await usersctl(t, target.url, ['import', '-f', file]);
  assert.equal(first.code, 0, first.stderr);
  const listing = (await send(target.url, 'GET', '/users')).text;
  const url = await target.restart();
  const second = await usersctl(t, url, ['import', '-f', file]);
  assert.equal(second.code, 0, second.stderr);
  const results = second.stdout.trim().split('\n').map((l) => JSON.parse(l) as { action: string; id: number });
  assert.deepEqual(results.map((r) => r.action), ['unchanged', 'unchanged', 'unchanged']);
  assert.equal((await send(url, 'GET', '/users')).text, listing, 'the second run changed the target');
  assert.equal(JSON.parse(listing).items.length, 3);
}

test('import of an export, run twice on a journal server restarted in between: the second run finds every user unchanged and adds none', async (t) => {
  await importTwice(t, ['--data', tempDir(t)]);
});

test('import of an export, run twice on a PostgreSQL server restarted in between: the second run finds every user unchanged and adds none', async (t) => {
  if (skipPostgres !== undefined) return t.skip(skipPostgres);
  await importTwice(t, ['--store', await testDatabase(t)]);
});
