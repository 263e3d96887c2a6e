/**
 * usersctl watch: the feed of changes on stdout, a line each as the server
 * sent it; --no-follow, --since and --from-start; reconnection with the last
 * cursor across a kill -9 and restart of the server (no gap, no duplicate);
 * an honest stop on SIGINT and on a closed output, whose last cursor is
 * the last change the reader may have had, noticed on an idle feed too;
 * and the sync.sh recipe of docs/cli.md, run as written.
 */
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { EXIT } from '../cli/exit-codes.js';
import { run } from '../cli/main.js';
import { lines, shellWithUsersctl, startCliServer } from './cli-helpers.js';
import { ADMIN_PASSWORD, put, send, startTestServer, tempDir } from './helpers.js';
import { CLI_BIN, runTool, serverPort, spawnChild, spawnServer, spawnUsersctl } from './processes.js';

test('usersctl watch --no-follow prints the changes committed so far, from the start or after --since, and exits 0; a bad cursor is refused', async (t) => {
  const cli = await startCliServer(t);
  for (const name of ['ann', 'bob', 'cy']) await put(cli.server.url, `/users/${name}`, { name });
  const all = await cli.run(['watch', '--from-start', '--no-follow']);
  assert.equal(all.code, EXIT.ok, all.stderr);
  assert.deepEqual(
    lines(all.stdout).map((l) => JSON.parse(l).user.name),
    ['ann', 'bob', 'cy'],
  );
  assert.equal(
    lines(all.stdout)[0],
    '{"cursor":"1","op":"put","id":1,"user":{"name":"ann","id":1}}',
    'the line as the server sent it',
  );
  const after = await cli.run(['watch', '--since', '2', '--no-follow']);
  assert.deepEqual(
    lines(after.stdout).map((l) => JSON.parse(l).cursor),
    ['3'],
  );
  const usage = await cli.run(['watch', '--since', 'abc']);
  assert.equal(usage.code, EXIT.usage);
  assert.match(usage.stderr, /--since "abc" is not a cursor/);
  const both = await cli.run(['watch', '--since', '1', '--from-start']);
  assert.equal(both.code, EXIT.usage);
  const unknown = await cli.run(['watch', '--since', '99', '--no-follow']);
  assert.notEqual(unknown.code, EXIT.ok);
  assert.match(unknown.stderr, /is not a cursor of this server/);
});

test('node bin/usersctl.js watch follows, connects again with its last cursor after the server is killed and restarted, and on SIGINT says the last cursor and exits 130', async (t) => {
  const dir = tempDir(t);
  const port = await serverPort();
  const args = ['--port', String(port), '--data', dir];
  const first = await spawnServer(t, args);
  const url = first.url;
  const watcher = spawnUsersctl(t, ['watch', '--from-start'], {
    env: { PATH: process.env.PATH, USERSCTL_URL: url, HOME: tempDir(t) },
  });
  for (const name of ['u1', 'u2']) await put(url, `/users/${name}`, { name });
  await watcher.waitForLine(/"cursor":"2"/);
  first.kill('SIGKILL');
  await first.exited;
  await watcher.waitForLine(/connecting again in [\d.]+ s from cursor 2/, 'stderr');
  const second = await spawnServer(t, args);
  await put(second.url, '/users/u3', { name: 'u3' });
  await watcher.waitForLine(/"cursor":"3"/);
  watcher.process.kill('SIGINT');
  const exit = await watcher.exited;
  assert.equal(exit.code, 130);
  assert.deepEqual(
    lines(watcher.stdout()).map((l) => JSON.parse(l).cursor),
    ['1', '2', '3'],
    'every change once',
  );
  assert.match(
    watcher.stderr(),
    /usersctl: stopped \(SIGINT\); the last cursor is 3: resume with usersctl watch --since 3\n$/,
  );
});

/**
 * A stdout whose reader leaves after the first write: the writes after it fail with EPIPE, as a pipe's do once `head -n
 * 1` has exited.
 */
class ReaderGoneAfterFirstWrite extends EventEmitter {
  text = '';
  private writes = 0;
  write(chunk: string): boolean {
    if (this.writes++ === 0) {
      this.text += chunk;
      this.emit('wrote');
      return true;
    }
    process.nextTick(() => this.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })));
    return false;
  }
}

test('usersctl watch whose reader leaves after the first change: the write of the second fails (EPIPE), and the cursor to resume from is the first, so the second is not skipped', async (t) => {
  const server = await startTestServer(t);
  const stdout = new ReaderGoneAfterFirstWrite();
  let stderr = '';
  const watching = run(['--url', server.url, 'watch', '--from-start'], {
    stdout,
    stderr: { write: (s: string) => (stderr += s) },
    stdin: Readable.from([]),
    env: { HOME: tempDir(t) },
  });
  const wrote = once(stdout, 'wrote');
  await put(server.url, '/users/ann', { name: 'Ann' });
  await wrote;
  await put(server.url, '/users/bob', { name: 'Bob' });
  assert.equal(await watching, 141);
  assert.equal(stdout.text, '{"cursor":"1","op":"put","id":1,"user":{"name":"Ann","id":1}}\n');
  assert.equal(
    stderr,
    'usersctl: stopped (output closed); the last cursor is 1: resume with usersctl watch --since 1\n',
  );
});

test('node bin/usersctl.js watch | head -n 1, then two changes: head has the first, stderr says its cursor, and watch --since that cursor gives the second', async (t) => {
  const server = await startTestServer(t);
  const env = { PATH: process.env.PATH, USERSCTL_URL: server.url, HOME: tempDir(t) };
  const pipeline = spawnChild(
    t,
    'bash',
    ['-c', 'set -o pipefail; "$0" "$1" watch --from-start | head -n 1', process.execPath, CLI_BIN],
    { env, group: true },
  );
  await put(server.url, '/users/ann', { name: 'Ann' });
  await pipeline.waitForLine(/"cursor":"1"/);
  await put(server.url, '/users/bob', { name: 'Bob' });
  const exit = await pipeline.exited;
  assert.equal(exit.code, 141, pipeline.stderr());
  assert.equal(
    pipeline.stderr(),
    'usersctl: stopped (output closed); the last cursor is 1: resume with usersctl watch --since 1\n',
  );
  const resumed = await runTool(t, process.execPath, [CLI_BIN, 'watch', '--since', '1', '--no-follow'], { env });
  assert.equal(resumed.code, EXIT.ok, resumed.stderr);
  assert.deepEqual(
    lines(resumed.stdout).map((l) => JSON.parse(l).user.name),
    ['Bob'],
    'the change head never read',
  );
});

test('node bin/usersctl.js watch --from-start | head -n 3 on an idle server exits once head has exited, with no change after (141, and the last cursor on stderr)', async (t) => {
  const server = await startTestServer(t);
  for (const name of ['ann', 'bob', 'cy']) await put(server.url, `/users/${name}`, { name });
  const env = { PATH: process.env.PATH, USERSCTL_URL: server.url, HOME: tempDir(t) };
  const pipeline = spawnChild(
    t,
    'bash',
    ['-c', 'set -o pipefail; "$0" "$1" watch --from-start | head -n 3', process.execPath, CLI_BIN],
    { env, group: true },
  );
  const exit = await pipeline.exited;
  assert.equal(exit.code, 141, pipeline.stderr());
  assert.deepEqual(
    lines(pipeline.stdout()).map((l) => JSON.parse(l).cursor),
    ['1', '2', '3'],
  );
  assert.equal(
    pipeline.stderr(),
    'usersctl: stopped (output closed); the last cursor is 3: resume with usersctl watch --since 3\n',
  );
});

test("node bin/usersctl.js watch with an API token that is revoked while it follows: the server ends the feed at its next check, and watch exits 4 with the server's sentence and the cursor to resume from", async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  const admin = await server.login();
  const made = await send(server.url, 'POST', '/tokens', { json: { name: 'feeder' }, headers: { cookie: admin } });
  const { id, token } = made.json() as { id: string; token: string };
  const watcher = spawnUsersctl(t, ['watch', '--from-start'], {
    env: { PATH: process.env.PATH, USERSCTL_URL: server.url, USERSCTL_TOKEN: token, HOME: tempDir(t) },
  });
  await put(server.url, '/users/ann', { name: 'Ann' }, { cookie: admin });
  await watcher.waitForLine(/"cursor":"1"/);
  assert.equal((await send(server.url, 'DELETE', `/tokens/${id}`, { headers: { cookie: admin } })).status, 204);
  server.running.app.feeds.recheck();
  const exit = await watcher.exited;
  assert.equal(exit.code, EXIT.unauthorized, watcher.stderr());
  assert.match(
    watcher.stderr(),
    /^usersctl: The API token is not known to this server: it was revoked, or never issued here\..* The last cursor is 1: resume with usersctl watch --since 1\n$/,
  );
});

/** The sync.sh recipe of docs/cli.md "watch", as written. */
function syncRecipe(): string {
  const text = readFileSync(fileURLToPath(new URL('../docs/cli.md', import.meta.url)), 'utf8');
  const match = /```sh\n(#!\/usr\/bin\/env bash\n# sync\.sh:[\s\S]*?)```/.exec(text);
  assert.ok(match !== null, 'docs/cli.md has the sync.sh recipe');
  return match[1]!;
}

test('the sync.sh recipe of docs/cli.md loads every user, then applies each change; a restart resumes after the last cursor saved; it exits 4 when its session ends', async (t) => {
  if ((await runTool(t, 'sh', ['-c', 'command -v jq && command -v bash'])).code !== 0)
    return t.skip('jq or bash not found');
  const server = await startTestServer(t, { requireSession: 'all' });
  const { home, env } = shellWithUsersctl(t, server.url);
  writeFileSync(join(home, 'sync.sh'), syncRecipe(), { mode: 0o755 });
  // The other system: prints what it is given.
  writeFileSync(join(home, 'bin', 'apply-change'), '#!/bin/sh\nprintf "applied %s\\n" "$1"\n', { mode: 0o755 });
  const login = await runTool(t, 'sh', ['-c', 'usersctl login --password-stdin'], {
    env,
    input: `${ADMIN_PASSWORD}\n`,
  });
  assert.equal(login.code, 0, login.stderr);
  const admin = await server.login();
  for (const name of ['ann', 'bob']) await put(server.url, `/users/${name}`, { name }, { cookie: admin });
  // Stopped as Ctrl-C or a service manager stops it: the whole pipeline.
  const sync = () => spawnChild(t, 'sh', ['-c', 'cd "$HOME" && exec ./sync.sh'], { env, group: true });
  const first = sync();
  await first.waitForLine(/^applied \{"op":"put","id":2,"user":\{"name":"bob","id":2\}\}$/);
  await put(server.url, '/users/cy', { name: 'cy' }, { cookie: admin });
  await first.waitForLine(/^applied \{"cursor":"3","op":"put","id":3/);
  first.kill('SIGTERM');
  await first.exited;
  await send(server.url, 'DELETE', '/users/1', { headers: { cookie: admin } });
  const again = sync();
  await again.waitForLine(/^applied \{"cursor":"4","op":"delete","id":1\}$/);
  assert.equal((await runTool(t, 'sh', ['-c', 'usersctl logout -q'], { env })).code, 0);
  server.running.app.feeds.recheck();
  const exit = await again.exited;
  assert.equal(exit.code, EXIT.unauthorized, again.stderr());
  const applied = (child: { stdout(): string }) => lines(child.stdout()).map((l) => l.replace(/^applied /, ''));
  assert.deepEqual(applied(first), [
    '{"op":"put","id":1,"user":{"name":"ann","id":1}}',
    '{"op":"put","id":2,"user":{"name":"bob","id":2}}',
    '{"cursor":"3","op":"put","id":3,"user":{"name":"cy","id":3}}',
  ]);
  // Stopped between applying cy and saving its cursor, the script gets cy again: at least once, never a gap.
  const after = applied(again);
  assert.deepEqual(after.slice(-1), ['{"cursor":"4","op":"delete","id":1}']);
  assert.ok(
    after.length === 1 || (after.length === 2 && after[0] === applied(first)[2]),
    `the restart resumes after the last cursor saved: ${after.join(' ')}`,
  );
  assert.equal(readFileSync(join(home, 'sync.cursor'), 'utf8'), '4\n');
});
