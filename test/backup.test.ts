/**
 * `users-server backup` (docs/operations.md "Backups"): a consistent copy of
 * a data directory taken while a server keeps writing and compacting in it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { onSmallDisk, put, runUsersServer, send, startTestServer, tempDir } from './helpers.js';
import { runTool, SERVER_BIN, spawnServer, spawnUsersServer } from './processes.js';
import { writeJournalData } from '../server/store/journal/dump-files.js';
import { backupDataFiles } from '../server/store/journal/backup-files.js';
import { recover } from '../server/store/journal/recovery.js';

test('node bin/users-server.js backup under write load (with compactions): the copy is a data directory of its own, and a server started on it has every write acknowledged before the backup began', async (t) => {
  const dir = join(tempDir(t), 'data');
  mkdirSync(dir);
  const server = await spawnServer(t, ['--port', '0', '--data', dir, '--compaction-floor', '4096']);
  const acked = new Map<string, string>();
  let stop = false;
  let writes = 0;
  let enough!: () => void;
  const warmedUp = new Promise<void>((resolve) => (enough = resolve));
  const writer = async (w: number) => {
    for (let i = 0; !stop; i++) {
      // New users and replacements of old ones: the journal grows past its floor and compacts.
      const ref = `/users/w${w}-${i % 40}`;
      const reply = await put(server.url, ref, { name: `Writer ${w}`, i, pad: 'x'.repeat(200) });
      assert.ok(reply.status === 200 || reply.status === 201, reply.text);
      acked.set(ref, reply.text);
      if (++writes >= 1500) enough();
    }
  };
  const writers = Promise.all(Array.from({ length: 6 }, (_, w) => writer(w)));
  await warmedUp;
  const before = new Map(acked);
  const dest = join(tempDir(t), 'backup');
  const backup = await runTool(t, process.execPath, [SERVER_BIN, 'backup', '--data', dir, '--to', dest]);
  stop = true;
  await writers;
  assert.equal(backup.code, 0, backup.stderr);
  assert.match(
    backup.stdout,
    /^backed up \d+ users \((snapshot-\d{8}, )?journal-\d{8}(, journal-\d{8})*: \d+ bytes of data\) from .* to .* in \d+ ms\n$/,
  );
  // The bytes of data, not the size of a journal preallocated with zeros (1 MiB and more).
  assert.ok(Number(/: (\d+) bytes of data/.exec(backup.stdout)![1]) < 1024 * 1024, backup.stdout);
  assert.deepEqual(
    readdirSync(dest)
      .filter((n) => !/^(journal|snapshot)-\d{8}$/.test(n))
      .sort(),
    ['admin-identity', 'secret'],
    "the secret and the admin's identity (this server's admin password comes from its environment)",
  );
  server.kill('SIGTERM');
  await server.exited;
  const restored = await startTestServer(t, { data: dest });
  for (const [ref, text] of before) {
    const now = await send(restored.url, 'GET', ref);
    assert.equal(now.status, 200, `${ref} was acknowledged before the backup began`);
    // Written again during the backup, it may be newer; never older than what was acknowledged before.
    assert.ok(JSON.parse(now.text).i >= JSON.parse(text).i, `${ref}: ${now.text} is older than ${text}`);
  }
});

test('users-server backup refuses a target that holds anything (no earlier backup is overwritten), a data directory that does not exist, and a PostgreSQL store (pg_dump does that)', async (t) => {
  const dir = tempDir(t);
  const server = await startTestServer(t, { data: dir });
  assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
  const full = join(tempDir(t), 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'journal-00000001'), 'an earlier backup');
  const refused = await runUsersServer(['backup', '--data', dir, '--to', full]);
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /^users-server backup: .*full is not empty \(journal-00000001\): back up into a new directory/,
  );
  const missing = await runUsersServer(['backup', '--data', join(dir, 'nope'), '--to', join(tempDir(t), 'x')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /does not exist: give the server's data directory with --data/);
  assert.equal(existsSync(join(tempDir(t), 'x')), false);
  const pg = await runUsersServer(['backup', '--store', 'postgres://db/users', '--to', join(tempDir(t), 'y')]);
  assert.equal(pg.code, 2);
  assert.match(pg.stderr, /pg_dump/);
  // And a backup of a running in-process server, through the command: a directory a server starts on.
  const dest = join(tempDir(t), 'ok');
  assert.equal((await runUsersServer(['backup', '--data', dir, '--to', dest])).code, 0);
  assert.equal((await send((await startTestServer(t, { data: dest })).url, 'GET', '/users/ann')).json().name, 'Ann');
});

test('users-server backup names what is wrong with --to, in one sentence and without a stack: a file, a folder inside --data, a path that cannot be made (under /proc, under a file)', async (t) => {
  const dir = tempDir(t);
  await startTestServer(t, { data: dir });
  const file = join(tempDir(t), 'a-file');
  writeFileSync(file, 'not a folder');
  const cases: [string, number, RegExp][] = [
    [file, 2, /^users-server backup: --to .*a-file is a file, not a folder; give a new or empty folder\n$/],
    [
      join(dir, 'inside'),
      2,
      /^users-server backup: --to must be outside --data: a backup inside the data directory is lost with it\n$/,
    ],
    [
      '/proc/users-server-backup',
      1,
      /^users-server backup: cannot create the backup folder: \/proc\/users-server-backup cannot be made there; give a path on a writable file system\n$/,
    ],
    [
      join(file, 'below'),
      1,
      /^users-server backup: cannot create the backup folder: a part of .*a-file\/below is a file, not a folder; check the path\n$/,
    ],
  ];
  for (const [to, code, stderr] of cases) {
    const run = await runUsersServer(['backup', '--data', dir, '--to', to]);
    assert.deepEqual([run.code, run.stdout], [code, ''], to);
    assert.match(run.stderr, stderr);
  }
  assert.equal(existsSync(join(dir, 'inside')), false);
});

test('users-server backup onto a disk that fills up during the copy (a 256 KiB tmpfs, a journal of 400 KB) fails in one sentence with exit 1 and leaves nothing: never a copy short of acknowledged writes', async (t) => {
  const dir = tempDir(t);
  const server = await startTestServer(t, { data: dir, secrets: ['a test secret of at least thirty-two bytes'] });
  for (let i = 0; i < 40; i++)
    assert.equal((await put(server.url, `/users/u${i}`, { name: `User ${i}`, pad: 'p'.repeat(10_000) })).status, 201);
  // The journal is the last file the backup writes (the secret and the admin password come from the test's settings): a
  // short write of it is not followed by a write that fails.
  assert.deepEqual(readdirSync(dir).sort(), ['admin-identity', 'journal-00000001', 'lock']);
  await onSmallDisk(t, '256k', async (disk) => {
    const run = await runUsersServer(['backup', '--data', dir, '--to', join(disk, 'backup')]);
    assert.deepEqual([run.code, run.stdout], [1, '']);
    assert.match(
      run.stderr,
      /^users-server backup: the backup failed, and what it had written was removed: no space left to write .*\/disk\/backup; free some space\n$/,
    );
    assert.deepEqual(readdirSync(disk), []);
  });
});

test('a backup killed while it copies (SIGKILL) leaves a folder that a start, repair, backup and accounts refuse, saying it is not whole; taken again, the backup is whole', async (t) => {
  const dir = join(tempDir(t), 'data');
  mkdirSync(dir);
  // 40,000 users, 10 MB: the copy and its check take a while, so the kill lands in them.
  const users = Array.from({ length: 40_000 }, (_, i) => ({
    id: i + 1,
    alias: undefined,
    json: JSON.stringify({ name: `User ${i + 1}`, note: 'x'.repeat(200), id: i + 1 }),
  }));
  await writeJournalData(dir, {
    lastId: users.length,
    claimed: [],
    users,
    redirects: [],
    reservations: [],
    idempotency: [],
    revoked: [],
    tokens: [],
    lastChange: 0,
  });
  const dest = join(tempDir(t), 'backup');
  mkdirSync(dest);
  let watcher: ReturnType<typeof watch> | undefined;
  const marked = new Promise<void>(
    (resolve) => (watcher = watch(dest, (_event, name) => name === 'unfinished' && resolve())),
  );
  t.after(() => watcher?.close());
  const backup = spawnUsersServer(t, ['backup', '--data', dir, '--to', dest]);
  await Promise.race([marked, backup.exited]);
  backup.process.kill('SIGKILL');
  const { code, signal } = await backup.exited;
  if (signal === 'SIGKILL') {
    assert.ok(readdirSync(dest).includes('unfinished'));
    for (const args of [
      ['--port', '0', '--data', dest],
      ['repair', '--data', dest],
      ['backup', '--data', dest, '--to', join(tempDir(t), 'copy')],
      ['accounts', 'list', '--data', dest],
    ]) {
      const refused = await runUsersServer(args);
      assert.equal(refused.code, 1, `${args.join(' ')}: ${refused.stderr}`);
      assert.match(
        refused.stderr,
        new RegExp(
          `^users-server(?: repair| backup| accounts)?: ${dest} is not whole: the backup from ${dir} stopped before it finished \\(unfinished says so\\), so it may hold part of the data; make it again, or remove ${dest}/unfinished to use what it holds\n$`,
        ),
        args.join(' '),
      );
    }
  } else assert.equal(code, 0, 'finished before the kill: then it is whole');
  const again = join(tempDir(t), 'again');
  const retaken = await runTool(t, process.execPath, [SERVER_BIN, 'backup', '--data', dir, '--to', again]);
  assert.equal(retaken.code, 0, retaken.stderr);
  assert.match(retaken.stdout, /^backed up 40000 users /);
  assert.ok(!readdirSync(again).includes('unfinished'));
  const server = await spawnServer(t, ['--port', '0', '--data', again]);
  assert.equal((await send(server.url, 'GET', '/users/40000')).status, 200);
});

/**
 * A data directory of 40,000 users (10 MB: its copy takes a while) with a secret, a generated admin password and
 * accounts.
 */
async function bigDataDir(t: TestContext): Promise<string> {
  const dir = join(tempDir(t), 'data');
  mkdirSync(dir);
  const users = Array.from({ length: 40_000 }, (_, i) => ({
    id: i + 1,
    alias: undefined,
    json: JSON.stringify({ name: `User ${i + 1}`, note: 'x'.repeat(200), id: i + 1 }),
  }));
  await writeJournalData(dir, {
    lastId: users.length,
    claimed: [],
    users,
    redirects: [],
    reservations: [],
    idempotency: [],
    revoked: [],
    tokens: [],
    lastChange: 0,
  });
  writeFileSync(join(dir, 'secret'), 'the-signing-secret-of-this-server-0123456789\n', { mode: 0o600 });
  writeFileSync(join(dir, 'admin-password'), 'the-generated-admin-password\n', { mode: 0o600 });
  writeFileSync(join(dir, 'accounts'), '', { mode: 0o600 });
  return dir;
}

const NOBODY = { uid: 65534, gid: 65534 };

/** Why this process cannot act as the user nobody (runuser, as root), or undefined. */
function nobodySkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root, to act as another user (nobody)';
  if (spawnSync('runuser', ['-u', 'nobody', '--', 'true']).status !== 0)
    return 'runuser -u nobody does not run (util-linux)';
  return undefined;
}

test('backup --to a folder everyone may write (like /tmp/bk): another user who plants links in it once the backup has begun gets no secret and overwrites nothing; the backup refuses in one sentence, exit 1, and leaves the folder as it was', async (t) => {
  const skip = nobodySkipReason();
  if (skip !== undefined) return t.skip(skip);
  const data = await bigDataDir(t);
  const place = tempDir(t);
  chmodSync(place, 0o755);
  const target = join(place, 'bk');
  mkdirSync(target);
  chmodSync(target, 0o777);
  // The attacker's files, readable by them, and a file of root's they would have overwritten.
  const attacker = join(place, 'att');
  mkdirSync(attacker);
  for (const name of ['s', 'p']) writeFileSync(join(attacker, name), '', { mode: 0o666 });
  chownSync(attacker, NOBODY.uid, NOBODY.gid);
  for (const name of ['s', 'p']) chownSync(join(attacker, name), NOBODY.uid, NOBODY.gid);
  const rootOwned = join(place, 'root-owned');
  writeFileSync(rootOwned, 'root only\n', { mode: 0o600 });
  const links = { secret: join(attacker, 's'), 'admin-password': join(attacker, 'p'), accounts: rootOwned };
  let watcher: ReturnType<typeof watch> | undefined;
  let planted: Promise<unknown> = Promise.resolve();
  const begun = new Promise<void>(
    (resolve) => (watcher = watch(target, (_event, name) => name === 'unfinished' && resolve())),
  );
  t.after(() => watcher?.close());
  const backup = spawnUsersServer(t, ['backup', '--data', data, '--to', target]);
  void begun.then(
    () =>
      (planted = Promise.all(
        Object.entries(links).map(([name, to]) =>
          runTool(t, 'runuser', ['-u', 'nobody', '--', 'ln', '-s', to, join(target, name)]),
        ),
      )),
  );
  const { code } = await backup.exited;
  await planted;
  assert.equal(readFileSync(join(attacker, 's'), 'utf8'), '', "the attacker's file got no secret");
  assert.equal(readFileSync(join(attacker, 'p'), 'utf8'), '', 'nor the admin password');
  assert.equal(readFileSync(rootOwned, 'utf8'), 'root only\n', 'a file the link points to is not overwritten');
  assert.equal(code, 1, backup.stderr());
  assert.match(
    backup.stderr(),
    /^users-server backup: \S+\/bk can be written by other users \(mode 0777\): back up into a folder only you can write \(chmod go-w\), or a new one\n$/,
  );
  assert.deepEqual(readdirSync(target), [], 'nothing written into it');
  assert.equal(lstatSync(target).mode & 0o7777, 0o777, 'and its mode as it was');
});

test('backup and copy write only into a folder no other user can change: a link as --to, a folder others may write, one under a folder others may write, and one of another user are refused in one sentence, exit 1, nothing written; under a sticky folder (as /tmp) the backup is made', async (t) => {
  const data = await bigDataDir(t);
  const place = tempDir(t);
  const elsewhere = join(place, 'elsewhere');
  mkdirSync(elsewhere);
  symlinkSync(elsewhere, join(place, 'link'));
  mkdirSync(join(place, 'open'));
  chmodSync(join(place, 'open'), 0o777);
  mkdirSync(join(place, 'shared'));
  chmodSync(join(place, 'shared'), 0o777);
  mkdirSync(join(place, 'sticky'));
  chmodSync(join(place, 'sticky'), 0o1777);
  const cases: [string, RegExp][] = [
    [
      'link',
      /^\S+\/link is a symbolic link: give the folder itself, so that no one can point it elsewhere while it is written\n$/,
    ],
    [
      'open',
      /^\S+\/open can be written by other users \(mode 0777\): VERB into a folder only you can write \(chmod go-w\), or a new one\n$/,
    ],
    [
      'shared/new',
      /^\S+\/shared, above \S+\/shared\/new, can be changed by another user \(uid \d+, mode 0777\), who could put a folder of their own in its place: VERB into a folder whose parents only you or root can change\n$/,
    ],
  ];
  if (nobodySkipReason() === undefined) {
    mkdirSync(join(place, 'theirs'), { mode: 0o700 });
    chownSync(join(place, 'theirs'), NOBODY.uid, NOBODY.gid);
    cases.push([
      'theirs',
      /^\S+\/theirs belongs to another user \(uid 65534\): back up into a folder of your own, or a new one\n$/,
    ]);
  }
  for (const [name, sentence] of cases) {
    const run = await runUsersServer(['backup', '--data', data, '--to', join(place, name)]);
    assert.deepEqual([run.code, run.stdout], [1, ''], name);
    assert.match(
      run.stderr.replace(/^users-server backup: /, ''),
      new RegExp(sentence.source.replace('VERB', 'back up')),
      name,
    );
    // copy checks a folder that exists before it reaches for the database (one it makes, once made).
    if (name === 'theirs' || name === 'shared/new') continue;
    const copy = await runUsersServer(['copy', '--from', 'postgres://127.0.0.1:9/users', '--to', join(place, name)]);
    assert.deepEqual([copy.code, copy.stdout], [1, ''], `copy to ${name}`);
    assert.match(
      copy.stderr.replace(/^users-server copy: /, ''),
      new RegExp(sentence.source.replace('VERB', 'copy')),
      `copy to ${name}`,
    );
  }
  assert.deepEqual(readdirSync(elsewhere), [], 'nothing written through the link');
  assert.deepEqual(readdirSync(join(place, 'open')), []);
  assert.deepEqual(readdirSync(join(place, 'shared')), [], 'the folder the backup made is removed again');
  const made = await runUsersServer(['backup', '--data', data, '--to', join(place, 'sticky', 'bk')]);
  assert.equal(made.code, 0, made.stderr);
  assert.match(made.stdout, /^backed up 40000 users /);
});

test("the data files a copy, a repair or a backup writes are created new, never through a link: a link left under the name of a snapshot's temp file or a journal is replaced (a copy, a repair) or refused (a backup), and what it points to is not written", async (t) => {
  const place = tempDir(t);
  const victims = ['a', 'b', 'c'].map((name) => join(place, `victim-${name}`));
  for (const victim of victims) writeFileSync(victim, 'untouched\n', { mode: 0o600 });
  const dir = join(place, 'copy');
  mkdirSync(dir);
  symlinkSync(victims[0]!, join(dir, 'snapshot-00000001.tmp'));
  symlinkSync(victims[1]!, join(dir, 'journal-00000001'));
  const users = [{ id: 1, alias: undefined, json: JSON.stringify({ name: 'Ann', id: 1 }) }];
  await writeJournalData(dir, {
    lastId: 1,
    claimed: [],
    users,
    redirects: [],
    reservations: [],
    idempotency: [],
    revoked: [],
    tokens: [],
    lastChange: 0,
  });
  for (const name of ['snapshot-00000001', 'journal-00000001'])
    assert.ok(lstatSync(join(dir, name)).isFile(), `${name} is a file of its own`);
  assert.equal(recover(dir).state.users.size, 1);
  const backup = join(place, 'backup');
  mkdirSync(backup);
  symlinkSync(victims[2]!, join(backup, 'snapshot-00000001'));
  assert.throws(() => backupDataFiles(dir, backup), { code: 'EEXIST' });
  for (const victim of victims) assert.equal(readFileSync(victim, 'utf8'), 'untouched\n', victim);
});
