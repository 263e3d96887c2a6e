/**
 * A start that fails before "listening on" leaves nothing new behind: no
 * data directory, secret, admin password, lock or journal: users-server's
 * command line run in process, the way an operator meets it (a port
 * already in use, a full disk).
 */
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { onSmallDisk, runUsersServer, startUsersServer, tempDir } from './helpers.js';

/** A port some other program holds for the length of the test. */
async function busyPort(t: TestContext): Promise<number> {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  return (holder.address() as AddressInfo).port;
}

/** `users-server ARGS` in process, a start that fails: exit 1; its stderr. */
async function failedStart(_t: TestContext, args: string[]): Promise<string> {
  const run = await runUsersServer(args);
  assert.equal(run.code, 1, run.stderr);
  return run.stderr;
}

/** Every entry under `dir`, with the content of its files: a picture to compare. */
function picture(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .map(
      (e) =>
        `${join(e.parentPath, e.name)}${e.isFile() ? ` ${readFileSync(join(e.parentPath, e.name), 'base64')}` : ''}`,
    )
    .sort();
}

test('a start on a port in use exits 1 naming the address, and makes no data directory (nor its parents)', async (t) => {
  const port = await busyPort(t);
  const root = tempDir(t);
  const stderr = await failedStart(t, ['--port', String(port), '--data', join(root, 'new', 'fresh')]);
  assert.equal(
    stderr,
    `users-server: the address 127.0.0.1:${port} is already in use: stop what listens there, or give another --port\n`,
  );
  assert.deepEqual(readdirSync(root), [], 'the failed start left a directory behind');
});

test('a start on a port in use leaves an empty data directory empty, and a used one as it was', async (t) => {
  const port = await busyPort(t);
  const empty = join(tempDir(t), 'empty');
  mkdirSync(empty);
  await failedStart(t, ['--port', String(port), '--data', empty]);
  assert.deepEqual(readdirSync(empty), []);

  const used = tempDir(t);
  const first = await startUsersServer(t, ['--port', '0', '--data', used], {
    env: { USERS_ADMIN_PASSWORD: undefined },
  });
  first.kill('SIGTERM');
  assert.equal((await first.exited).code, 0);
  const before = picture(used);
  await failedStart(t, ['--port', String(port), '--data', used]);
  assert.deepEqual(picture(used), before);
});

test('a start on a full disk (a 64 KiB tmpfs) exits 1 with one sentence, no stack trace, and leaves no data directory: with no room for the folder, and with room for it but not for its secret', async (t) => {
  await onSmallDisk(t, '64k', async (disk) => {
    const fill = (leave: number) => {
      const { bavail, bsize } = statfsSync(disk);
      writeFileSync(join(disk, `filler-${leave}`), Buffer.alloc(Math.max(0, bavail * bsize - leave)));
    };
    const data = join(disk, 'data');
    fill(0);
    assert.equal(
      await failedStart(t, ['--port', '0', '--data', data]),
      `users-server: cannot open the store in ${data}: no space left to write ${data}; free some space\n`,
    );
    for (const name of readdirSync(disk)) if (name.startsWith('filler')) writeFileSync(join(disk, name), '');
    fill(8192);
    assert.equal(
      await failedStart(t, ['--port', '0', '--data', data]),
      `users-server: cannot write the data directory: no space left to write ${data}; free some space\n`,
    );
    assert.deepEqual(
      readdirSync(disk).filter((name) => !name.startsWith('filler')),
      [],
    );
  });
});
