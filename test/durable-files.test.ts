/**
 * replaceFileSoon (server/ops/durable-files.ts), the one asynchronous
 * whole-file replacement compaction's snapshot and index cache use: the
 * name changes only once the file is whole and synced; giving up or failing
 * leaves the old file and no temp file; a link planted at the temp name is
 * removed, never written through.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { replaceFileSoon } from '../server/ops/durable-files.js';
import { tempDir } from './helpers.js';

/** A directory holding `old` as file `f`, with the paths the calls take. */
function setUp(t: Parameters<typeof tempDir>[0]): { dir: string; path: string; temp: string } {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'f'), 'old');
  return { dir, path: join(dir, 'f'), temp: join(dir, 'f.tmp') };
}

test('replaceFileSoon: what fill writes, in its pieces, takes the name; nothing else is left in the directory', async (t) => {
  const { dir, path, temp } = setUp(t);
  const done = await replaceFileSoon(temp, path, 0o600, async (write) => {
    await write(Buffer.from('new '));
    await write(Buffer.from('content'));
    return true;
  });
  assert.equal(done, true);
  assert.equal(readFileSync(path, 'utf8'), 'new content');
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(dir), ['f']);
});

test('replaceFileSoon: a fill that gives up, or a write no longer wanted once synced, leaves the old file and no temp file', async (t) => {
  const { dir, path, temp } = setUp(t);
  const gaveUp = await replaceFileSoon(temp, path, 0o600, async (write) => {
    await write(Buffer.from('part'));
    return false;
  });
  assert.deepEqual(readdirSync(dir), ['f'], 'the temp file of the fill that gave up is removed');
  const unwanted = await replaceFileSoon(
    temp,
    path,
    0o600,
    async (write) => (await write(Buffer.from('whole')), true),
    () => false,
  );
  assert.deepEqual([gaveUp, unwanted], [false, false]);
  assert.equal(readFileSync(path, 'utf8'), 'old');
  assert.deepEqual(readdirSync(dir), ['f']);
});

test('replaceFileSoon: a fill that fails leaves the old file and no temp file, and the failure is thrown', async (t) => {
  const { dir, path, temp } = setUp(t);
  const full = Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
  await assert.rejects(
    replaceFileSoon(temp, path, 0o600, async (write) => {
      await write(Buffer.from('part'));
      throw full;
    }),
    full,
  );
  assert.equal(readFileSync(path, 'utf8'), 'old');
  assert.deepEqual(readdirSync(dir), ['f']);
});

test('replaceFileSoon: a link planted at the temp name is removed, and the file it points to is not written', async (t) => {
  const { dir, path, temp } = setUp(t);
  const victim = join(tempDir(t), 'victim');
  writeFileSync(victim, 'precious');
  symlinkSync(victim, temp);
  assert.equal(
    await replaceFileSoon(temp, path, 0o600, async (write) => (await write(Buffer.from('new')), true)),
    true,
  );
  assert.equal(readFileSync(victim, 'utf8'), 'precious');
  assert.equal(readFileSync(path, 'utf8'), 'new');
  assert.deepEqual(readdirSync(dir), ['f']);
});
