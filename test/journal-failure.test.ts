/**
 * The durable journal store, issue 3 "Write path": a write is acknowledged
 * only after its record is written and fdatasynced; if a write or fdatasync
 * fails, the affected requests fail (500, problem body), nothing is
 * acknowledged, and the server stops. Single writer: a second server on the
 * same directory refuses to start; a lock left by a killed server does not
 * block the next start.
 *
 * Injected failures go through `startServer(config, { journalIo, onFatal })`
 * (server/listen.ts): the test's writev/fdatasync hold the call it wants to
 * fail until more requests have queued behind it, then fail it.
 *
 * A real failure in a real process: the child runs under `ulimit -f` (a
 * per-process file-size limit any user may lower; node ignores SIGXFSZ), so
 * the journal's writev really fails with EFBIG once the file reaches the
 * limit. A read-only data directory cannot fail as root (permissions do not
 * bind root) and a full disk needs a mount, so neither is used.
 */
import assert from 'node:assert/strict';
import {
  closeSync,
  fdatasync as realFdatasync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  watch,
  writeFileSync,
  writev as realWritev,
} from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import { sweepOnce } from '../server/commands/serve.js';
import { StoreFullError, StoreUnavailableError } from '../server/errors.js';
import type { Config } from '../server/ops/config.js';
import { lockOwnerPid } from '../server/ops/data-dir.js';
import { HEADER_BYTES } from '../server/store/journal/codec.js';
import type { JournalIo } from '../server/store/journal/journal.js';
import { openStore } from '../server/store/open-store.js';
import type { Store } from '../server/store/store.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  listText,
  onSmallDisk,
  put,
  send,
  startTestServer,
  tempDir,
  type Reply,
  type TestServer,
} from './helpers.js';
import {
  beyondDataLine,
  SERVER_BIN,
  spawnChild,
  spawnServer,
  spawnUsersServer,
  cleanEnv,
  type Child,
} from './processes.js';

const JOURNAL = 'journal-00000001';
const CHILD_TEST = {};

// ---------------------------------------------------------------- injected failures

type Call = 'writev' | 'fdatasync';
type WritevCallback = (error: NodeJS.ErrnoException | null, written: number, buffers: NodeJS.ArrayBufferView[]) => void;
type SyncCallback = (error: NodeJS.ErrnoException | null) => void;

interface Held {
  fd: number;
  buffers: NodeJS.ArrayBufferView[];
  /** Completes the held call: with an error, or (writev) with the real write of the first `bytes` bytes. */
  fail(error: NodeJS.ErrnoException): void;
  writePart(bytes: number): void;
}

function ioError(code: string, syscall: Call): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected failure, ${syscall}`), {
    code,
    syscall,
    errno: code === 'EIO' ? -5 : -28,
  });
}

/**
 * The real writev and fdatasync, except that `hold(call)` stops the next
 * call of that kind until the test completes it, and after `failWrites()`
 * every writev fails with ENOSPC. Counts the calls.
 */
class FaultyIo {
  readonly calls = { writev: 0, fdatasync: 0 };
  /** The file of the first writev: the journal the server started with. */
  firstFd: number | undefined;
  private armed: { call: Call; resolve: (held: Held) => void; fd?: (fd: number) => boolean } | undefined;
  private writesFail = false;

  readonly io: JournalIo = {
    writev: ((fd: number, buffers: NodeJS.ArrayBufferView[], position: number, cb: WritevCallback) => {
      this.calls.writev++;
      this.firstFd ??= fd;
      if (this.writesFail) return process.nextTick(cb, ioError('ENOSPC', 'writev'), 0, buffers);
      if (this.armed?.call === 'writev' && (this.armed.fd?.(fd) ?? true)) {
        const { resolve } = this.armed;
        this.armed = undefined;
        return resolve({
          fd,
          buffers,
          fail: (error) => cb(error, 0, buffers),
          writePart: (bytes) => {
            const part = Buffer.concat(buffers.map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength))).subarray(
              0,
              bytes,
            );
            realWritev(fd, [part], position, (error, written) => cb(error, written, buffers));
          },
        });
      }
      realWritev(fd, buffers, position, cb);
    }) as JournalIo['writev'],
    fdatasync: ((fd: number, cb: SyncCallback) => {
      this.calls.fdatasync++;
      if (this.armed?.call === 'fdatasync') {
        const { resolve } = this.armed;
        this.armed = undefined;
        return resolve({
          fd,
          buffers: [],
          fail: (error) => cb(error),
          writePart: () => assert.fail('fdatasync writes nothing'),
        });
      }
      realFdatasync(fd, cb);
    }) as JournalIo['fdatasync'],
  };

  /** Resolves when the next `call` (on a file `fd` accepts) arrives; it waits until the test completes it. */
  hold(call: Call, fd?: (fd: number) => boolean): Promise<Held> {
    return new Promise((resolve) => (this.armed = { call, resolve, ...(fd && { fd }) }));
  }

  failWrites(): void {
    this.writesFail = true;
  }

  allowWrites(): void {
    this.writesFail = false;
  }
}

interface Failing extends TestServer {
  dir: string;
  faults: FaultyIo;
  fatal: Error[];
  logs: string[];
}

async function startFailing(
  t: TestContext,
  dir: string,
  overrides: Partial<Config> = {},
  withOnFatal = true,
): Promise<Failing> {
  const faults = new FaultyIo();
  const fatal: Error[] = [];
  const logs: string[] = [];
  const server = await startTestServer(
    t,
    { data: dir, ...overrides },
    {
      journalIo: faults.io,
      logError: (line) => logs.push(line),
      ...(withOnFatal && { onFatal: (error: Error) => void fatal.push(error) }),
    },
  );
  return { ...server, dir, faults, fatal, logs };
}

/**
 * Resolves once the store's `names` methods have returned `count` times in
 * all: a write of the memory and journal stores is applied when its method
 * returns (its promise waits for the sync), a read is queued behind the sync.
 */
function afterCalls(store: Store, names: readonly (keyof Store)[], count: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const methods = store as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const name of names) {
      const original = methods[name]!.bind(store);
      methods[name] = (...args: unknown[]) => {
        const result = original(...args);
        if (++seen === count) resolve();
        return result;
      };
    }
  });
}

/** Where the journal's bytes end: the file's length without its preallocated zeros. */
function journalSize(dir: string): number {
  const bytes = readFileSync(join(dir, JOURNAL));
  let end = bytes.length;
  while (end > HEADER_BYTES && bytes[end - 1] === 0) end--;
  return end;
}

interface FailureCase {
  name: string;
  /** The call held while more requests queue up. */
  call: Call;
  /** How the held call ends. */
  finish(held: Held, faults: FaultyIo): void;
  error: RegExp;
  /**
   * Whether the records of the batch that failed may be in the file afterwards (a write that succeeded before its sync
   * failed).
   */
  writtenBeforeFailure: boolean;
  /** The log line of the next start, if the failure left a torn record. */
  tornTail: boolean;
}

const failureCases: FailureCase[] = [
  {
    name: 'fdatasync fails with EIO',
    call: 'fdatasync',
    finish: (held) => held.fail(ioError('EIO', 'fdatasync')),
    error: /^journal write failed: EIO: /,
    writtenBeforeFailure: true,
    tornTail: false,
  },
];

for (const c of failureCases) {
  test(`journal failure (${c.name}): every request in flight answers 500 with a problem body, none is acknowledged, later writes fail too, onFatal is called once, and a restart has every acknowledged write`, async (t) => {
    const dir = tempDir(t);
    const server = await startFailing(t, dir);
    const url = server.url;
    for (let i = 0; i < 5; i++) assert.equal((await put(url, `/users/acked${i}`, { name: `Acked ${i}` })).status, 201);
    const acked = await listText(server);
    // A's batch reaches the held call; B, C and a read of A queue behind it.
    const held = server.faults.hold(c.call);
    const a = put(url, '/users/inflight-a', { name: 'A' });
    const call = await held;
    const committed = afterCalls(server.running.store, ['putUser', 'createUser'], 2);
    const waiting = afterCalls(server.running.store, ['findUser'], 1);
    const b = put(url, '/users/inflight-b', { name: 'B' });
    const cc = send(url, 'POST', '/users/new', { json: { name: 'C' } });
    const read = send(url, 'GET', '/users/inflight-a');
    await committed;
    await waiting;
    const sizeAtFailure = journalSize(dir);
    c.finish(call, server.faults);

    const inFlight: [string, Reply][] = [
      ['PUT A', await a],
      ['PUT B', await b],
      ['POST C', await cc],
      ['GET A', await read],
    ];
    for (const [what, reply] of inFlight) assertProblem(reply, 500, 'internal', `${what} in flight`);
    assert.equal(server.fatal.length, 1, 'onFatal calls');
    assert.match(server.fatal[0]!.message, c.error);
    assert.ok(
      server.logs.some((l) => /^users-server: journal write failed: .*; stopping: /.test(l)),
      `no "journal write failed ...; stopping" log line: ${server.logs.join('\n')}`,
    );

    const sizeAfterFailure = journalSize(dir);
    if (c.tornTail) assert.equal(sizeAfterFailure, sizeAtFailure + 11, 'the part written before the failure');
    else if (!c.writtenBeforeFailure)
      assert.equal(sizeAfterFailure, sizeAtFailure, 'nothing of the failed batch is in the file');
    const writesBefore = server.faults.calls.writev;
    const later: [string, Reply][] = [
      ['PUT a new user', await put(url, '/users/later', { name: 'Later' })],
      ['PUT an acknowledged user', await put(url, '/users/acked0', { name: 'Changed' })],
      ['DELETE', await send(url, 'DELETE', '/users/acked1')],
      ['POST /users/new', await send(url, 'POST', '/users/new', { json: { name: 'Later 2' } })],
      ['POST /reservations', await send(url, 'POST', '/reservations')],
    ];
    for (const [what, reply] of later) assertProblem(reply, 500, 'internal', `${what} after the failure`);
    assert.equal(server.faults.calls.writev, writesBefore, 'the store wrote again after the failure');
    assert.equal(journalSize(dir), sizeAfterFailure, 'the journal grew after the failure');
    assert.equal(server.fatal.length, 1, 'onFatal is called once, not per failed request');
    await server.running.stop();
    // What a restart cuts off: the torn part and the preallocated zeros after it.
    const tail = statSync(join(dir, JOURNAL)).size - sizeAtFailure;

    const logs: string[] = [];
    const restarted = await startTestServer(t, { data: dir }, { logError: (l) => logs.push(l) });
    const after = await listText(restarted);
    const withA = acked.replace(/\],"next"/, ',{"name":"A","id":6}],"next"');
    if (c.writtenBeforeFailure) assert.ok(after === acked || after === withA, `after the restart: ${after}`);
    else assert.equal(after, acked, 'after the restart: exactly the acknowledged writes');
    if (c.tornTail)
      assert.deepEqual(logs, [
        `users-server: ${JOURNAL}: dropped ${tail} bytes at offset ${sizeAtFailure} (a record that is incomplete or fails its checksum): the end of a write that was never acknowledged`,
      ]);
    else assert.deepEqual(logs, []);
    const next = await send(restarted.url, 'POST', '/users/new', { json: { name: 'Next' } });
    assert.equal(next.status, 201, next.text);
    assert.ok(
      Number(/\d+$/.exec(String(next.headers.location))![0]) > 5,
      `an acknowledged id was issued again: ${next.headers.location}`,
    );
  });
}

const fullDiskCases: { name: string; finish: (held: Held, faults: FaultyIo) => void }[] = [
  {
    name: 'writev fails with ENOSPC',
    finish: (held, faults) => (faults.failWrites(), held.fail(ioError('ENOSPC', 'writev'))),
  },
  {
    name: 'writev writes part of the batch, then fails with ENOSPC',
    finish: (held, faults) => (faults.failWrites(), held.writePart(11)),
  },
];

for (const c of fullDiskCases) {
  test(`a full disk (${c.name}): the requests in flight answer 503 disk-full with Retry-After, the partial record is cut back, the server stays up and serves reads, /readyz and /metrics say so, and writes succeed again once space is back (no restart)`, async (t) => {
    const dir = tempDir(t);
    let now = Date.now();
    const faults = new FaultyIo();
    const fatal: Error[] = [];
    const logs: string[] = [];
    const server = await startTestServer(
      t,
      { data: dir },
      {
        journalIo: faults.io,
        clock: () => now,
        logError: (line) => logs.push(line),
        onFatal: (error: Error) => void fatal.push(error),
      },
    );
    const url = server.url;
    for (let i = 0; i < 5; i++) assert.equal((await put(url, `/users/acked${i}`, { name: `Acked ${i}` })).status, 201);
    const acked = await listText(server);
    const held = faults.hold('writev');
    const a = put(url, '/users/inflight-a', { name: 'A' });
    const call = await held;
    const committed = afterCalls(server.running.store, ['putUser', 'createUser'], 2);
    const b = put(url, '/users/inflight-b', { name: 'B' });
    const cc = send(url, 'POST', '/users/new', { json: { name: 'C' } });
    await committed;
    const sizeAtFailure = journalSize(dir);
    c.finish(call, faults);
    for (const [what, reply] of [
      ['PUT A', await a],
      ['PUT B', await b],
      ['POST C', await cc],
    ] as const) {
      assertProblem(reply, 503, 'disk-full', `${what} in flight`);
      assert.equal(reply.headers['retry-after'], '5', what);
    }
    assert.deepEqual(fatal, [], 'a full disk is not fatal');
    assert.ok(
      logs.some((l) => /^users-server: the disk is full \(ENOSPC\)/.test(l)),
      logs.join('\n'),
    );
    assert.equal(journalSize(dir), sizeAtFailure, 'the partial record was cut back');
    assert.equal(await listText(server), acked, 'reads serve exactly the acknowledged writes');
    assert.equal((await send(url, 'GET', '/users/inflight-a')).status, 404);
    assertProblem(
      await put(url, '/users/later', { name: 'Later' }),
      503,
      'disk-full',
      'a write while the disk is full',
    );
    assertProblem(await send(url, 'GET', '/readyz'), 503, 'not-ready');
    assert.match((await send(url, 'GET', '/metrics')).text, /^users_server_disk_full 1$/m);
    // Space comes back; a second later a write finds it.
    faults.allowWrites();
    now += 1001;
    let reply = await put(url, '/users/later', { name: 'Later' });
    for (let i = 0; i < 1000 && reply.status === 503; i++) reply = await put(url, '/users/later', { name: 'Later' });
    assert.equal(reply.status, 201, reply.text);
    assert.ok(logs.includes('users-server: disk space is back: writes are accepted again'), logs.join('\n'));
    assert.equal((await send(url, 'GET', '/readyz')).status, 200);
    assert.match((await send(url, 'GET', '/metrics')).text, /^users_server_disk_full 0$/m);
    const expected = await listText(server);
    await server.running.stop();
    const restartLogs: string[] = [];
    const restarted = await startTestServer(t, { data: dir }, { logError: (l) => restartLogs.push(l) });
    assert.equal(await listText(restarted), expected, 'a restart has the same users');
    assert.deepEqual(restartLogs, [], 'no torn tail to drop');
  });
}

test('a full disk while a compaction writes its snapshot: the refused writes answer 503, the compaction finishes undisturbed (its files are not read or removed under it), reads serve the acknowledged writes, and a restart has them', async (t) => {
  const dir = tempDir(t);
  let now = Date.now();
  const faults = new FaultyIo();
  const fatal: Error[] = [];
  const logs: string[] = [];
  let compacted!: () => void;
  const compactionDone = new Promise<void>((resolve) => (compacted = resolve));
  const log = (line: string) => {
    logs.push(line);
    if (/^users-server: compact/.test(line)) compacted();
  };
  const server = await startTestServer(
    t,
    { data: dir, compactionFloor: 4096 },
    { journalIo: faults.io, clock: () => now, logError: log, onFatal: (error: Error) => void fatal.push(error) },
  );
  const url = server.url;
  // The snapshot's temp file, seen as it appears: the disk fills while it is being written.
  const watcher = watch(dir);
  t.after(() => watcher.close());
  const snapshotStarted = new Promise<void>((resolve) =>
    watcher.on('change', (_, name) => String(name).endsWith('.tmp') && resolve()),
  );
  const held = faults.hold('writev', (fd) => fd !== faults.firstFd);
  // Eight writers keep a batch filling, so the first write into the next journal comes while the snapshot is written.
  const acked = new Map<string, string>();
  const refused: Reply[] = [];
  const writer = async (w: number) => {
    for (let round = 0; refused.length === 0; round++) {
      const reply = await put(url, `/users/w${w}`, { name: `Writer ${w}`, round, pad: 'p'.repeat(500) });
      if (reply.status === 200 || reply.status === 201) acked.set(`/users/w${w}`, reply.text);
      else refused.push(reply);
    }
  };
  const writers = Promise.all(Array.from({ length: 8 }, (_, w) => writer(w)));
  const call = await held;
  await snapshotStarted;
  faults.failWrites();
  call.fail(ioError('ENOSPC', 'writev'));
  await writers;
  for (const reply of refused) assertProblem(reply, 503, 'disk-full', 'a write the full disk refused');
  await compactionDone;
  assert.deepEqual(fatal, [], 'a full disk during a compaction is not fatal');
  assert.ok(
    logs.some((l) => /^users-server: compacted \d+ journal bytes/.test(l)),
    logs.join('\n'),
  );
  assert.deepEqual(
    readdirSync(dir)
      .filter((name) => /^(journal|snapshot)-/.test(name))
      .sort(),
    ['journal-00000002', 'snapshot-00000002'],
  );
  for (const [ref, text] of acked)
    assert.equal((await send(url, 'GET', ref)).text, text, `GET ${ref} serves its acknowledged write`);
  faults.allowWrites();
  now += 1001;
  let reply = await put(url, '/users/later', { name: 'Later' });
  for (let i = 0; i < 1000 && reply.status === 503; i++) reply = await put(url, '/users/later', { name: 'Later' });
  assert.equal(reply.status, 201, reply.text);
  const expected = await listText(server);
  await server.running.stop();
  const restarted = await startTestServer(t, { data: dir });
  assert.equal(await listText(restarted), expected, 'a restart has the same users');
});

test('journal failure: after a failed fdatasync a read never shows a write that failed (it was never acknowledged)', async (t) => {
  const dir = tempDir(t);
  const server = await startFailing(t, dir);
  assert.equal((await put(server.url, '/users/acked', { name: 'Acked' })).status, 201);
  const acked = await listText(server);
  const held = server.faults.hold('fdatasync');
  const a = put(server.url, '/users/failed', { name: 'Failed' });
  (await held).fail(ioError('EIO', 'fdatasync'));
  assertProblem(await a, 500, 'internal', 'the failed PUT');
  const read = await send(server.url, 'GET', '/users/failed');
  assert.notEqual(read.status, 200, `GET shows the write that failed: ${read.text}`);
  const list = await send(server.url, 'GET', '/users?limit=1000');
  assert.ok(list.status !== 200 || list.text === acked, `the listing shows the write that failed: ${list.text}`);
});

test('journal failure without onFatal: the server stops itself (it no longer accepts connections), and a restart has every acknowledged write', async (t) => {
  const dir = tempDir(t);
  const server = await startFailing(t, dir, {}, false);
  assert.equal((await put(server.url, '/users/acked', { name: 'Acked' })).status, 201);
  const acked = await listText(server);
  const held = server.faults.hold('fdatasync');
  const a = put(server.url, '/users/failed', { name: 'Failed' });
  (await held).fail(ioError('EIO', 'fdatasync'));
  assertProblem(await a, 500, 'internal', 'the failed PUT');
  if (server.running.server.listening) await once(server.running.server, 'close');
  await assert.rejects(send(server.url, 'GET', '/healthz'), /ECONNREFUSED/);
  await server.running.stop();
  const restarted = await startTestServer(t, { data: dir });
  const after = await listText(restarted);
  assert.ok(after === acked || after === acked.replace(/\],"next"/, ',{"name":"Failed","id":2}],"next"'), after);
});

// ---------------------------------------------------------------- child processes

/** `node bin/users-server.js ARGS` under `ulimit -f BLOCKS` (bash: 1024-byte blocks), SIGXFSZ ignored. */
function spawnWithFileSizeLimit(t: TestContext, args: string[], kib: number): Child {
  const script = `trap '' XFSZ; ulimit -f ${kib} && exec "$0" "$@"`;
  return spawnChild(t, 'bash', ['-c', script, process.execPath, SERVER_BIN, ...args], {
    env: {
      ...cleanEnv(),
      USERS_ADMIN_PASSWORD: ADMIN_PASSWORD,
      USERS_PASSWORD_COST: '1',
      USERS_REQUIRE_SESSION: 'none',
    },
    cwd: tempDir(t),
  });
}

async function listening(child: Child): Promise<string> {
  return (await child.waitForLine(/^listening on (http:\/\/\S+)$/))[1]!;
}

test(
  'node bin/users-server.js: when the journal really cannot be written (file-size limit, EFBIG) the failing request gets 500, the process logs "journal write failed ...; stopping" and exits 1, and a restart has every acknowledged write',
  CHILD_TEST,
  async (t) => {
    const dir = tempDir(t);
    const child = spawnWithFileSizeLimit(t, ['--port', '0', '--data', dir], 1500);
    const url = await listening(child);
    const acked: string[] = [];
    let failed: Reply | undefined;
    for (let i = 0; i < 100 && failed === undefined; i++) {
      const reply = await put(url, `/users/u${i}`, { name: `User ${i}`, pad: 'p'.repeat(15_000) });
      if (reply.status === 201) acked.push(reply.text);
      else failed = reply;
    }
    assert.ok(failed !== undefined, 'every write succeeded: the file-size limit did not apply');
    assertProblem(failed, 500, 'internal', 'the write that hit the limit');
    assert.ok(acked.length > 5, `only ${acked.length} writes before the limit`);
    const result = await child.exited;
    assert.equal(result.signal, null, `killed by ${result.signal}: SIGXFSZ was not ignored`);
    assert.equal(result.code, 1, `exit code; stderr=${child.stderr()}`);
    assert.match(
      beyondDataLine(child.stderr()),
      /^users-server: journal write failed: EFBIG: [^\n]*; stopping: [^\n]+\n$/,
      'exactly one stderr line',
    );

    const restarted = await startTestServer(t, { data: dir }, { logError: () => {} });
    const list = (await send(restarted.url, 'GET', '/users?limit=1000')).json() as { items: unknown[] };
    assert.deepEqual(
      list.items.slice(0, acked.length).map((u) => JSON.stringify(u)),
      acked,
      'every acknowledged write, in order',
    );
    assert.ok(list.items.length <= acked.length + 1, `more users than writes: ${list.items.length}`);
  },
);

test(
  'node bin/users-server.js: a second server on the same data directory exits 1 with one stderr line, and the first keeps serving',
  CHILD_TEST,
  async (t) => {
    const dir = tempDir(t);
    const first = spawnUsersServer(t, ['--port', '0', '--data', dir]);
    const url = await listening(first);
    assert.equal((await put(url, '/users/ann', { name: 'Ann' })).status, 201);
    const second = spawnUsersServer(t, ['--port', '0', '--data', dir]);
    const result = await second.exited;
    assert.equal(result.code, 1, `exit code; stderr=${second.stderr()}`);
    assert.equal(second.stdout(), '');
    assert.match(
      second.stderr(),
      new RegExp(
        `^users-server: another users-server \\(pid ${first.process.pid}\\) is using the data directory [^\\n]+: stop it first, or give another --data\\n$`,
      ),
    );
    assert.equal((await send(url, 'GET', '/users/ann')).status, 200, 'the first server still serves');
    assert.equal(String(lockOwnerPid(dir)), String(first.process.pid));
    first.process.kill('SIGTERM');
    assert.equal((await first.exited).code, 0);
  },
);

test(
  'node bin/users-server.js: the lock left by a server killed with SIGKILL does not block the next start, which has every acknowledged write',
  CHILD_TEST,
  async (t) => {
    const dir = tempDir(t);
    const first = spawnUsersServer(t, ['--port', '0', '--data', dir]);
    const url = await listening(first);
    for (let i = 0; i < 5; i++) assert.equal((await put(url, `/users/u${i}`, { name: `U${i}` })).status, 201);
    const acked = await listText({ url });
    first.process.kill('SIGKILL');
    assert.equal((await first.exited).signal, 'SIGKILL');
    assert.equal(String(lockOwnerPid(dir)), String(first.process.pid), 'the killed server left its lock');

    const next = spawnUsersServer(t, ['--port', '0', '--data', dir]);
    const nextUrl = await listening(next);
    assert.equal(await listText({ url: nextUrl }), acked);
    assert.equal(String(lockOwnerPid(dir)), String(next.process.pid), 'the lock was taken over');
    next.process.kill('SIGTERM');
    assert.equal((await next.exited).code, 0, next.stderr());
  },
);

// ---------------------------------------------------------------- a real full disk

/** PUTs 20 KB users until one is refused; the acknowledged ones' references. */
async function fillUp(url: string, prefix: string): Promise<{ acked: string[]; refused: Reply }> {
  const acked: string[] = [];
  for (let i = 0; ; i++) {
    const reply = await put(url, `/users/${prefix}${i}`, { name: `${prefix} ${i}`, pad: 'p'.repeat(20_000) });
    if (reply.status !== 201) return { acked, refused: reply };
    acked.push(`/users/${prefix}${i}`);
  }
}

test(
  'node bin/users-server.js on a real full disk (a 4 MiB tmpfs): writes answer 503 disk-full, reads go on, space freed makes writes work again without a restart, and after kill -9 the server starts on the full disk and serves every acknowledged write',
  CHILD_TEST,
  async (t) => {
    await onSmallDisk(t, '4m', async (disk) => {
      const dir = join(disk, 'data');
      mkdirSync(dir);
      const ballast = join(disk, 'ballast');
      writeFileSync(ballast, Buffer.alloc(1024 * 1024, 1));
      const args = [
        '--port',
        '0',
        '--data',
        dir,
        '--max-body',
        '100000',
        '--compaction-floor',
        String(64 * 1024 * 1024),
      ];
      const first = await spawnServer(t, args);
      const { acked, refused } = await fillUp(first.url, 'u');
      assertProblem(refused, 503, 'disk-full');
      assert.ok(acked.length > 10, `${acked.length} writes before the disk was full`);
      await first.waitForLine(/^users-server: the disk is full \(ENOSPC\)/, 'stderr');
      for (const ref of acked) assert.equal((await send(first.url, 'GET', ref)).status, 200, `GET ${ref}`);
      assert.equal((await send(first.url, 'GET', '/readyz')).status, 503);
      assert.match((await send(first.url, 'GET', '/metrics')).text, /^users_server_disk_full 1$/m);
      // A PUT of what a user already holds changes nothing, so it needs no room.
      const held = await send(first.url, 'GET', acked[0]!);
      assert.equal(
        (await send(first.url, 'PUT', acked[0]!, { body: held.text, headers: { 'content-type': 'application/json' } }))
          .status,
        200,
        'a PUT that changes nothing on the full disk',
      );
      // Space freed: within a second or so a write finds it (each try is a request, no sleep).
      unlinkSync(ballast);
      let reply = await put(first.url, '/users/after-free', { name: 'After' });
      while (reply.status === 503) reply = await put(first.url, '/users/after-free', { name: 'After' });
      assert.equal(reply.status, 201, reply.text);
      await first.waitForLine(/^users-server: disk space is back/, 'stderr');
      acked.push('/users/after-free');
      const more = await fillUp(first.url, 'v');
      assertProblem(more.refused, 503, 'disk-full');
      acked.push(...more.acked);
      first.kill('SIGKILL');
      await first.exited;

      const second = await spawnServer(t, args);
      for (const ref of acked)
        assert.equal((await send(second.url, 'GET', ref)).status, 200, `after the restart on a full disk: GET ${ref}`);
      const write = await put(second.url, '/users/w', { name: 'W', pad: 'p'.repeat(20_000) });
      assert.ok(
        write.status === 201 || write.status === 503,
        `a write on the full disk: ${write.status} ${write.text}`,
      );
      second.kill('SIGTERM');
      assert.equal((await second.exited).code, 0, second.stderr());
    });
  },
);

test(
  'node bin/users-server.js: a compaction that runs out of disk (a 4 MiB tmpfs) removes its partial snapshot, leaves the journals in charge, and after kill -9 a start has every acknowledged write',
  CHILD_TEST,
  async (t) => {
    await onSmallDisk(t, '4m', async (disk) => {
      const dir = join(disk, 'data');
      mkdirSync(dir);
      const args = ['--port', '0', '--data', dir, '--max-body', '100000', '--compaction-floor', '4096'];
      const server = await spawnServer(t, args);
      // 120 users of 12 KB are the live data (1.45 MB). Replacing them once grows
      // the journal past twice that (2.9 MB), when compaction is due; beside it
      // the 4 MiB disk has 1.3 MB left, so the snapshot never fits, whatever
      // the next journal has taken meanwhile.
      const latest = new Map<string, string>();
      let refused: Reply | undefined;
      for (let round = 0; refused === undefined; round++) {
        for (let i = 0; i < 120 && refused === undefined; i++) {
          const body = { name: `User ${i}`, round, pad: 'p'.repeat(12_000) };
          const reply = await put(server.url, `/users/u${i}`, body);
          if (reply.status === 201 || reply.status === 200) latest.set(`/users/u${i}`, reply.text);
          else refused = reply;
        }
      }
      assertProblem(refused, 503, 'disk-full');
      await server.waitForLine(/^users-server: compaction failed, will retry later: /, 'stderr');
      server.kill('SIGKILL');
      await server.exited;
      assert.deepEqual(
        readdirSync(dir).filter((name) => name.endsWith('.tmp')),
        [],
        'no partial snapshot left',
      );
      const restarted = await spawnServer(t, args);
      for (const [ref, text] of latest)
        assert.equal((await send(restarted.url, 'GET', ref)).text, text, `after the restart: GET ${ref}`);
      restarted.kill('SIGTERM');
      assert.equal((await restarted.exited).code, 0, restarted.stderr());
    });
  },
);

test('a write after the journal closed is refused as unavailable before the state changes, and a file opened since (on its descriptor number) receives none of it', async (t) => {
  const dir = tempDir(t);
  const fatal: Error[] = [];
  const options = { log: () => {}, onFatal: (error: Error) => fatal.push(error) };
  const putTo = (s: Store, alias: string) =>
    s.putUser({
      ref: { kind: 'alias', alias },
      body: { name: alias },
      preconditions: { ifMatch: undefined, ifNoneMatch: undefined },
      policy: { allowIdChange: false, requireIfMatch: false },
      now: Date.now(),
    });
  const store = await openStore('journal', dir, options);
  assert.equal((await putTo(store, 'early')).kind, 'created');
  const closing = store.close();
  await assert.rejects(async () => putTo(store, 'while-closing'), StoreUnavailableError);
  await closing;
  const other = join(dir, 'opened-after-close');
  const fd = openSync(other, 'w+');
  t.after(() => closeSync(fd));
  await assert.rejects(async () => putTo(store, 'late'), StoreUnavailableError);
  // Whatever a late write would have scheduled has run by now.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(readFileSync(other).length, 0, 'the late write went into a file opened after the close');
  assert.deepEqual(fatal, []);
  assert.equal(await store.findUser({ kind: 'alias', alias: 'late' }), undefined);
  const again = await openStore('journal', dir, options);
  t.after(() => again.close());
  assert.ok(await again.findUser({ kind: 'alias', alias: 'early' }));
  assert.equal(await again.findUser({ kind: 'alias', alias: 'late' }), undefined);
  assert.equal(await again.findUser({ kind: 'alias', alias: 'while-closing' }), undefined);
});

test('the periodic sweep of a store that refuses it at once (a full disk) or later throws nothing out of its timer', async () => {
  const refusals = [
    () => {
      throw new StoreFullError('The disk is full.');
    },
    () => Promise.reject(new StoreFullError('The disk is full.')),
  ];
  let swept = 0;
  for (const refuse of refusals)
    sweepOnce({
      sweep: () => {
        swept++;
        return refuse();
      },
    });
  // An unhandled rejection would fail this test once the turn ends.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(swept, 2);
});
