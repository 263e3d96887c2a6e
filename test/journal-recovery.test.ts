/**
 * The durable journal store, issue 3 "Recovery", on real files written by
 * the real server:
 * - a damaged tail after the last valid record (torn write, zero bytes,
 *   garbage) is truncated and one log line says how many bytes went;
 * - damage followed by valid records, damage in a snapshot or in a journal
 *   that is not the last, a foreign or garbled header, a missing journal
 *   generation: the start is refused, naming the file, the offset and
 *   `users-server repair --data DIR`, and nothing is changed;
 * - `users-server repair` keeps a `.damaged-` copy and recovers the prefix
 *   before the damage.
 *
 * The every-offset test calls `recover()` (server/store/recovery.ts, what
 * start-up runs) directly for every offset of the last three records, and
 * starts the real server in-process for a sample of those offsets: a start
 * costs an scrypt hash of the admin password (~0.25 s), so a start per
 * offset would take minutes. The real `node bin/users-server.js` runs the
 * refusal and `repair` once (needs `npm run build`).
 */
import assert from 'node:assert/strict';
import {
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statfsSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, test, type TestContext } from 'node:test';
import type { Config } from '../server/ops/config.js';
import { writeAccountsFile } from '../server/security/accounts-file.js';
import { hashPassword } from '../server/security/credentials.js';
import {
  encodeHeader,
  encodeRecord,
  FileKind,
  FORMAT_VERSION,
  HEADER_BYTES,
  recordAt,
} from '../server/store/journal/codec.js';
import { recover } from '../server/store/journal/recovery.js';
import type { StoreState } from '../server/store/memory/state.js';
import {
  listText,
  onSmallDisk,
  put,
  runUsersServer,
  send,
  startTestServer,
  tempDir,
  type TestServer,
} from './helpers.js';
import { spawnServer, spawnUsersServer, beyondDataLine } from './processes.js';

const JOURNAL = 'journal-00000001';
const DROPPED = (name: string, bytes: number, offset: number, reason: string) =>
  `users-server: ${name}: dropped ${bytes} bytes at offset ${offset} (${reason}): the end of a write that was never acknowledged`;
const TORN = 'a record that is incomplete or fails its checksum';

// ---------------------------------------------------------------- the journal written by the server

interface Fixture {
  /** A stopped server's data directory: lock released, secret, journal-00000001. */
  dir: string;
  /** The journal's bytes. */
  bytes: Buffer;
  /** ends[j]: the journal's length once commit j was acknowledged; ends[0] is the header. */
  ends: number[];
  /** listings[j]: GET /users?limit=1000 right after commit j. */
  listings: string[];
  /** lastIds[j]: the highest id issued by commits 1..j. */
  lastIds: number[];
}

let fixture: Promise<Fixture> | undefined;
const fixtureDirs: string[] = [];
after(() => {
  for (const dir of fixtureDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Writes a journal through the real server, one commit per request (the
 * requests are sequential, so each batch holds one record), and notes after
 * each acknowledgement the file length, the listing and the id high-water
 * mark. Built once; tests work on copies.
 */
function journalFixture(): Promise<Fixture> {
  fixture ??= (async () => {
    const dir = tempDir(undefined, 'users-server-journal-fixture-');
    fixtureDirs.push(dir);
    // startTestServer wants a TestContext for its cleanup; stop it here instead.
    const cleanups: (() => unknown)[] = [];
    const fakeT = { after: (fn: () => unknown) => cleanups.push(fn) } as unknown as TestContext;
    const server = await startTestServer(fakeT, { data: dir });
    const journal = join(dir, JOURNAL);
    const f: Fixture = {
      dir,
      bytes: Buffer.alloc(0),
      ends: [recordsEnd(journal)],
      listings: [await listText(server)],
      lastIds: [0],
    };
    let lastId = 0;
    const commit = async (what: string, request: () => Promise<{ status: number; text: string }>, issues = false) => {
      const reply = await request();
      assert.ok(reply.status >= 200 && reply.status < 300, `${what}: ${reply.status} ${reply.text}`);
      if (issues) lastId = Math.max(lastId, (JSON.parse(reply.text) as { id: number }).id);
      f.ends.push(recordsEnd(journal));
      f.listings.push(await listText(server));
      f.lastIds.push(lastId);
    };
    const json = { 'content-type': 'application/json' };
    let aliasCreated = '';
    for (let i = 0; i < 30; i++) {
      switch (i % 6) {
        case 0:
          await commit(
            `POST /users/new #${i}`,
            () => send(server.url, 'POST', '/users/new', { json: { name: `New ${i}` } }),
            true,
          );
          break;
        case 1:
          aliasCreated = `a${i}`;
          await commit(
            `PUT /users/${aliasCreated}`,
            () =>
              put(server.url, `/users/${aliasCreated}`, { name: `Alias ${i}`, tags: ['t', i], note: 'tab\tnewline\n' }),
            true,
          );
          break;
        case 2:
          await commit(`PUT /users/1 #${i}`, () => put(server.url, '/users/1', { name: `One v${i}` }));
          break;
        case 3:
          await commit(
            `POST /reservations #${i}`,
            () => send(server.url, 'POST', '/reservations', { headers: json, body: '{}' }),
            true,
          );
          break;
        case 4:
          await commit(`DELETE /users/${aliasCreated}`, () => send(server.url, 'DELETE', `/users/${aliasCreated}`));
          break;
        case 5:
          await commit(
            `keyed POST /users/new #${i}`,
            () =>
              send(server.url, 'POST', '/users/new', {
                json: { name: `Keyed ${i}` },
                headers: { 'idempotency-key': `key-${i}` },
              }),
            true,
          );
          break;
      }
    }
    const cookie = await server.login();
    await commit('POST /logout', () => send(server.url, 'POST', '/logout', { headers: { cookie } }));
    // The last three records: a reservation, a long create, a delete.
    await commit(
      'POST /reservations (third-last record)',
      () => send(server.url, 'POST', '/reservations', { headers: json, body: '{}' }),
      true,
    );
    await commit(
      'PUT /users/long (second-last record)',
      () => put(server.url, '/users/long', { name: 'Long', pad: 'é'.repeat(60) }),
      true,
    );
    await commit('DELETE /users/1 (last record)', () => send(server.url, 'DELETE', '/users/1'));
    await server.running.stop();
    for (const fn of cleanups) await fn();
    f.bytes = readFileSync(journal);
    return f;
  })();
  return fixture;
}

/** Where a running server's journal records end: before its preallocated zeros. */
function recordsEnd(path: string): number {
  const bytes = readFileSync(path);
  let end = bytes.length;
  while (end > HEADER_BYTES && bytes[end - 1] === 0) end--;
  return end;
}

/** The offsets of every record in a journal, read with the codec. */
function recordStarts(bytes: Buffer): number[] {
  const starts: number[] = [];
  let at = HEADER_BYTES;
  for (;;) {
    const length = recordAt(bytes, at);
    if (length === 0) break;
    starts.push(at);
    at += length;
  }
  assert.equal(at, bytes.length, 'the journal the server wrote does not parse to its end');
  return starts;
}

/** The listing GET /users?limit=1000 would answer for a recovered state. */
function listingOf(state: StoreState): string {
  return `{"items":[${state.sortedIds.map((id) => state.users.get(id)!.json).join(',')}],"next":null}`;
}

/** How many commits a journal cut at `cut` holds whole. */
function wholeCommits(f: Fixture, cut: number): number {
  let k = 0;
  while (k + 1 < f.ends.length && f.ends[k + 1]! <= cut) k++;
  return k;
}

/** A copy of the fixture directory whose journal is `bytes`. */
function copyWith(t: TestContext, f: Fixture, bytes: Buffer): string {
  const dir = tempDir(t);
  cpSync(f.dir, dir, { recursive: true });
  writeFileSync(join(dir, JOURNAL), bytes);
  return dir;
}

interface Started extends TestServer {
  logs: string[];
}

async function startOn(t: TestContext, dir: string, overrides: Partial<Config> = {}): Promise<Started> {
  const logs: string[] = [];
  const server = await startTestServer(t, { data: dir, ...overrides }, { logError: (line) => logs.push(line) });
  return { ...server, logs };
}

/** Asserts that a start on `dir` is refused with `pattern`, and that no file in `dir` changed. */
async function assertRefused(t: TestContext, dir: string, pattern: RegExp): Promise<void> {
  const before = snapshotDir(dir);
  const logs: string[] = [];
  await assert.rejects(startTestServer(t, { data: dir }, { logError: (line) => logs.push(line) }), (error: Error) => {
    assert.equal(error.name, 'DataError', `${error.name}: ${error.message}`);
    assert.match(error.message, pattern);
    assert.ok(!error.message.includes('\n'), 'one line');
    return true;
  });
  const after = snapshotDir(dir);
  delete before.lock;
  delete after.lock;
  assert.deepEqual(Object.keys(after), Object.keys(before), 'the refused start added or removed files');
  for (const name of Object.keys(before))
    assert.ok(after[name]!.equals(before[name]!), `the refused start changed ${name}`);
}

function snapshotDir(dir: string): Record<string, Buffer> {
  const files: Record<string, Buffer> = {};
  for (const name of readdirSync(dir).sort()) files[name] = readFileSync(join(dir, name));
  return files;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function refusal(name: string, offset: number, dir: string, validAfter?: number): RegExp {
  const follows = validAfter === undefined ? '' : `, and valid records follow at offset ${validAfter}`;
  return new RegExp(
    `^${escape(name)} is damaged at byte offset ${offset} \\([^\\n]+\\)${escape(follows)}; nothing was changed\\. Run: users-server repair --data ${escape(dir)}$`,
  );
}

/** A fixed pseudo-random byte source (xorshift32), so a failure can be reproduced. */
function pseudoRandomBytes(n: number, seed = 0x9e3779b9): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

// ---------------------------------------------------------------- the fixture itself

test('the journal the server wrote holds one framed record per acknowledged commit, each acknowledged only once it was in the file', async () => {
  const f = await journalFixture();
  assert.ok(f.ends.length > 30, `${f.ends.length - 1} commits`);
  assert.equal(f.ends[0], HEADER_BYTES);
  assert.ok(f.bytes.subarray(0, HEADER_BYTES).equals(encodeHeader(FileKind.Journal, 1)), 'the header');
  assert.deepEqual(
    recordStarts(f.bytes),
    f.ends.slice(0, -1),
    'record boundaries = the file length at each acknowledgement',
  );
  assert.equal(f.bytes.length, f.ends.at(-1));
});

// ---------------------------------------------------------------- every offset

test('recovery: a journal cut at every byte offset inside its last three records recovers exactly the commits acknowledged before the cut record, drops the rest with one note, and truncates the file there (recover() for every offset)', async (t) => {
  const f = await journalFixture();
  const n = f.ends.length - 1;
  const first = f.ends[n - 3]!;
  const dir = tempDir(t);
  const path = join(dir, JOURNAL);
  let checked = 0;
  for (let cut = first; cut <= f.bytes.length; cut++) {
    writeFileSync(path, f.bytes.subarray(0, cut));
    const k = wholeCommits(f, cut);
    const end = f.ends[k]!;
    const r = recover(dir);
    const where = `cut at ${cut} (commit ${k} of ${n} whole)`;
    assert.equal(listingOf(r.state), f.listings[k], `${where}: users`);
    assert.equal(r.state.lastId, f.lastIds[k], `${where}: id high-water mark`);
    assert.deepEqual([r.journal?.generation, r.journal?.end], [1, end], `${where}: where appending resumes`);
    const tail = f.bytes.subarray(end, cut);
    const note = `${JOURNAL}: dropped ${cut - end} bytes at offset ${end} (${tail.every((b) => b === 0) ? 'zero bytes' : TORN}): the end of a write that was never acknowledged`;
    assert.deepEqual(r.notes, cut === end ? [] : [note], `${where}: notes`);
    assert.equal(statSync(path).size, end, `${where}: file length after recovery`);
    checked++;
  }
  assert.equal(checked, f.bytes.length - first + 1);
  assert.ok(checked > 100, `only ${checked} offsets`);
});

test('recovery: the real server started on a journal cut inside one of its last three records serves exactly the acknowledged prefix, logs the dropped bytes, truncates the file, and appends after it (sampled offsets)', async (t) => {
  const f = await journalFixture();
  const n = f.ends.length - 1;
  const [a, b, c, d] = [f.ends[n - 3]!, f.ends[n - 2]!, f.ends[n - 1]!, f.ends[n]!];
  const cuts = [a, a + 1, a + 7, Math.floor((a + b) / 2), b, b + 8, Math.floor((b + c) / 2), c - 1, c + 3, d - 1, d];
  for (const cut of cuts) {
    const dir = copyWith(t, f, f.bytes.subarray(0, cut));
    const k = wholeCommits(f, cut);
    const end = f.ends[k]!;
    const where = `cut at ${cut} (commit ${k} of ${n} whole)`;
    let server = await startOn(t, dir);
    assert.equal(await listText(server), f.listings[k], `${where}: users`);
    assert.deepEqual(server.logs, cut === end ? [] : [DROPPED(JOURNAL, cut - end, end, TORN)], `${where}: log`);
    assert.equal(statSync(join(dir, JOURNAL)).size, end, `${where}: file length after start`);
    const added = await put(server.url, '/users/after-recovery', { name: 'After' });
    assert.equal(added.status, 201, `${where}: ${added.text}`);
    assert.equal(
      added.headers.location,
      `/users/${f.lastIds[k]! + 1}`,
      `${where}: the next id follows the recovered high-water mark`,
    );
    const expected = await listText(server);
    await server.running.stop();
    server = await startOn(t, dir);
    assert.equal(await listText(server), expected, `${where}: a write after recovery survives a restart`);
    assert.deepEqual(server.logs, [], `${where}: the second start finds nothing to drop`);
    await server.running.stop();
  }
});

// ---------------------------------------------------------------- damaged tails

const tails: { name: string; tail: () => Buffer; reason: string }[] = [
  { name: '4096 random bytes', tail: () => pseudoRandomBytes(4096), reason: TORN },
  { name: 'one random byte', tail: () => pseudoRandomBytes(1, 7), reason: TORN },
  {
    name: 'half a valid record followed by 4096 zero bytes',
    tail: () => Buffer.concat([encodeRecord('p\t99\t\t{"name":"Ghost","id":99}').subarray(0, 20), Buffer.alloc(4096)]),
    reason: TORN,
  },
  {
    name: 'a valid record whose last byte is missing',
    tail: () => encodeRecord('p\t99\t\t{"name":"Ghost","id":99}').subarray(0, -1),
    reason: TORN,
  },
];

for (const c of tails) {
  test(`recovery: a tail of ${c.name} after the last record is dropped with one log line, and the server serves every acknowledged commit`, async (t) => {
    const f = await journalFixture();
    const tail = c.tail();
    const dir = copyWith(t, f, Buffer.concat([f.bytes, tail]));
    const server = await startOn(t, dir);
    assert.deepEqual(server.logs, [DROPPED(JOURNAL, tail.length, f.bytes.length, c.reason)]);
    assert.equal(statSync(join(dir, JOURNAL)).size, f.bytes.length, 'file length after start');
    assert.equal(await listText(server), f.listings.at(-1));
  });
}

test("recovery: zeros after the last record are the journal's preallocated space: they are cut off without a log line (nothing written there was acknowledged), and the server serves every acknowledged commit and appends after them", async (t) => {
  const f = await journalFixture();
  const dir = copyWith(t, f, Buffer.concat([f.bytes, Buffer.alloc(4096)]));
  let server = await startOn(t, dir);
  assert.deepEqual(server.logs, []);
  assert.equal(statSync(join(dir, JOURNAL)).size, f.bytes.length, 'file length after start');
  assert.equal(await listText(server), f.listings.at(-1));
  assert.equal((await put(server.url, '/users/after-zeros', { name: 'After' })).status, 201);
  const expected = await listText(server);
  await server.running.stop();
  server = await startOn(t, dir);
  assert.equal(await listText(server), expected);
  assert.deepEqual(server.logs, []);
});

test('repair: zeros after the last record are not damage: repair finds nothing to repair', async (t) => {
  const f = await journalFixture();
  const dir = copyWith(t, f, Buffer.concat([f.bytes, Buffer.alloc(4096)]));
  const { code, out, err } = await runRepair(dir);
  assert.equal(code, 0, err);
  assert.match(out, /no damage found/);
  assert.deepEqual(
    readdirSync(dir).filter((name) => name.startsWith('repair-')),
    [],
  );
});

// ---------------------------------------------------------------- corruption refuses

interface Flip {
  name: string;
  /** Byte offset inside the record, and the bit. */
  at: number;
  bit: number;
}

const flips: Flip[] = [
  { name: 'its payload', at: 9, bit: 0x10 },
  { name: 'its length field', at: 0, bit: 0x01 },
  { name: 'the top byte of its length field', at: 3, bit: 0x80 },
  { name: 'its checksum', at: 5, bit: 0x04 },
];

function flipped(f: Fixture, record: number, flip: Flip): { bytes: Buffer; offset: number; next: number } {
  const bytes = Buffer.from(f.bytes);
  const offset = f.ends[record - 1]!;
  bytes[offset + flip.at]! ^= flip.bit;
  return { bytes, offset, next: f.ends[record]! };
}

for (const flip of flips) {
  test(`recovery: a single flipped bit in ${flip.name} of a record in the middle of the journal refuses the start, naming the file, the offset and users-server repair --data DIR, and changes nothing`, async (t) => {
    const f = await journalFixture();
    const middle = Math.floor((f.ends.length - 1) / 2);
    const { bytes, offset, next } = flipped(f, middle, flip);
    const dir = copyWith(t, f, bytes);
    await assertRefused(t, dir, refusal(JOURNAL, offset, dir, next));
  });
}

/** Runs `users-server repair --data DIR` in process: its exit code and what it printed. */
async function runRepair(dir: string): Promise<{ code: number; out: string; err: string }> {
  const run = await runUsersServer(['repair', '--data', dir]);
  return { code: run.code, out: run.stdout, err: run.stderr };
}

/**
 * The listing a server gives on the fixture's journal without the record at [from, to): what repair must bring back.
 */
async function listingWithout(t: TestContext, f: Fixture, from: number, to: number): Promise<string> {
  const server = await startOn(t, copyWith(t, f, Buffer.concat([f.bytes.subarray(0, from), f.bytes.subarray(to)])));
  const listing = await listText(server);
  await server.running.stop();
  return listing;
}

test('repair: after a flipped bit in the middle, repair resumes at the next record, moves the originals into a repair- folder, lists what it dropped, exits 3, and the server starts with every other commit', async (t) => {
  const f = await journalFixture();
  const middle = Math.floor((f.ends.length - 1) / 2);
  const { bytes, offset, next } = flipped(f, middle, flips[0]!);
  const dir = copyWith(t, f, bytes);
  const expected = await listingWithout(t, f, offset, next);
  const { code, out, err } = await runRepair(dir);
  assert.equal(code, 3, `exit ${code}; stderr=${err}`);
  assert.equal(err, '');
  const lines = out.trimEnd().split('\n');
  assert.equal(
    lines[0],
    `${JOURNAL}: dropped ${next - offset} bytes at offset ${offset}: bytes that are not a whole record with a good checksum`,
  );
  const kept = /^kept the original files in (\S+)$/.exec(lines[1]!);
  assert.ok(kept !== null, lines[1]);
  assert.match(kept[1]!, new RegExp(`^${escape(dir)}/repair-\\d{8}T\\d{6}Z$`));
  assert.ok(readFileSync(join(kept[1]!, JOURNAL)).equals(bytes), 'the original journal, byte for byte');
  assert.match(
    lines[2]!,
    new RegExp(`^recovered \\d+ users into snapshot-00000002; dropped ${next - offset} bytes in 1 place$`),
  );
  assert.deepEqual(
    readdirSync(dir)
      .filter((name) => /^(journal|snapshot)-\d{8}$/.test(name))
      .sort(),
    ['journal-00000002', 'snapshot-00000002'],
  );

  const server = await startOn(t, dir);
  assert.deepEqual(server.logs, []);
  assert.equal(await listText(server), expected, 'every commit but the damaged one');
  const created = await put(server.url, '/users/after-repair', { name: 'After' });
  assert.ok(
    Number(String(created.headers.location).split('/').at(-1)) > f.lastIds.at(-1)!,
    `a new id above every id ever issued: ${created.headers.location}`,
  );
});

test('repair: one flipped byte in the middle of a 5,000-user journal brings back 4,999 users (at least 90% asked for), and reports exactly one dropped record', async (t) => {
  const dir = tempDir(t);
  const records = Array.from({ length: 5000 }, (_, i) =>
    encodeRecord(`p\t${i + 1}\t\t{"name":"User ${i + 1}","id":${i + 1}}`),
  );
  const bytes = Buffer.concat([encodeHeader(FileKind.Journal, 1), ...records]);
  const middle = HEADER_BYTES + records.slice(0, 2500).reduce((sum, r) => sum + r.length, 0);
  bytes[middle + 12]! ^= 0x01;
  writeFileSync(join(dir, JOURNAL), bytes);
  const { code, out } = await runRepair(dir);
  assert.equal(code, 3, out);
  assert.equal(out.split('\n').filter((l) => l.includes(': dropped ')).length, 1, out);
  assert.match(out, /recovered 4999 users/);
  const server = await startOn(t, dir);
  const list = JSON.parse((await send(server.url, 'GET', '/users?limit=1000')).text) as { items: { id: number }[] };
  assert.equal(list.items[0]!.id, 1);
  assert.equal((await send(server.url, 'GET', '/users/2501')).status, 404, 'the damaged record is the one user lost');
  assert.equal((await send(server.url, 'GET', '/users/5000')).status, 200, 'the records after the damage are back');
});

test('a batch of large writes (three 3 MB users at once, past the size where a batch is measured byte by byte) is written whole: a restart reads every one back', async (t) => {
  const dir = tempDir(t);
  const server = await startTestServer(t, { data: dir, maxBody: 8 * 1024 * 1024 });
  // Multi-byte characters, so the bytes differ from the UTF-16 length the batch is first bounded by.
  const pads = ['a', 'é', '☃'].map((c) => c.repeat(3_000_000 / Buffer.byteLength(c)));
  const replies = await Promise.all(pads.map((pad, i) => put(server.url, `/users/big${i}`, { name: `Big ${i}`, pad })));
  assert.deepEqual(
    replies.map((r) => r.status),
    [201, 201, 201],
  );
  await server.running.stop();
  const again = await startTestServer(t, { data: dir });
  for (const [i, pad] of pads.entries())
    assert.equal((await send(again.url, 'GET', `/users/big${i}`)).json().pad, pad, `big${i}`);
});

test('repair on a disk with no room for the repaired copy (a full tmpfs) fails in one sentence with exit 1, and the directory is as it was: no partial snapshot, no new journal, no repair- folder', async (t) => {
  const f = await journalFixture();
  const middle = Math.floor((f.ends.length - 1) / 2);
  const damaged = copyWith(t, f, flipped(f, middle, flips[0]!).bytes);
  await onSmallDisk(t, '4m', async (disk) => {
    const dir = join(disk, 'data');
    cpSync(damaged, dir, { recursive: true });
    const { bavail, bsize } = statfsSync(disk);
    writeFileSync(join(disk, 'filler'), Buffer.alloc(bavail * bsize));
    const before = snapshotDir(dir);
    const { code, out, err } = await runRepair(dir);
    assert.equal(code, 1, out);
    assert.equal(
      err,
      `users-server repair: failed, nothing was removed: no space left to write ${dir}; free some space\n`,
    );
    assert.deepEqual(snapshotDir(dir), before);
    // Once there is room, the same command repairs.
    rmSync(join(disk, 'filler'));
    assert.equal((await runRepair(dir)).code, 3);
  });
});

test('repair: a journal written by a newer format is refused (exit 1, nothing changed), and the start says to upgrade, never to repair', async (t) => {
  const f = await journalFixture();
  const dir = copyWith(t, f, patch(f.bytes, 8, [FORMAT_VERSION + 1, 0]));
  const before = snapshotDir(dir);
  const message = `${JOURNAL} was written by format ${FORMAT_VERSION + 1}; this users-server reads up to format ${FORMAT_VERSION}; upgrade users-server to start on it (nothing was changed)`;
  await assertRefused(t, dir, new RegExp(`^${escape(message)}$`));
  const { code, out, err } = await runRepair(dir);
  assert.equal(code, 1, out);
  assert.equal(err, `users-server repair: failed, nothing was removed: ${message}\n`);
  assert.deepEqual(snapshotDir(dir), before);
});

test('repair: on an undamaged directory users-server repair says so, exits 0 and changes nothing', async (t) => {
  const f = await journalFixture();
  const dir = copyWith(t, f, f.bytes);
  const before = snapshotDir(dir);
  const { code, out } = await runRepair(dir);
  assert.equal(code, 0);
  assert.equal(
    out,
    `${dir}: no damage found (${JSON.parse(f.listings.at(-1)!).items.length} users); nothing to repair\n`,
  );
  assert.deepEqual(snapshotDir(dir), before);
});

/** A directory holding snapshot-G + journal-G, made by compaction. */
async function compactedDir(t: TestContext): Promise<{ dir: string; generation: string; listing: string }> {
  const dir = tempDir(t);
  const server = await startOn(t, dir, { compactionFloor: 4096 });
  for (let i = 0; i < 10; i++) assert.equal((await put(server.url, `/users/u${i}`, { name: `U${i}` })).status, 201);
  for (let i = 0; !server.logs.some((l) => l.startsWith('users-server: compacted ')); i++) {
    assert.ok(i < 400, 'no compaction');
    assert.equal((await put(server.url, '/users/1', { name: 'U0', pad: 'x'.repeat(400), i })).status, 200);
  }
  assert.equal((await put(server.url, '/users/u0', { name: 'U0 final' })).status, 200);
  const listing = await listText(server);
  await server.running.stop();
  const snapshot = readdirSync(dir).find((name) => /^snapshot-\d{8}$/.test(name));
  assert.ok(snapshot !== undefined, `no snapshot: ${readdirSync(dir).join(' ')}`);
  return { dir, generation: snapshot.slice('snapshot-'.length), listing };
}

test('recovery: a single flipped bit inside a snapshot refuses the start, naming the snapshot, the offset and the repair command, and changes nothing', async (t) => {
  const { dir, generation, listing } = await compactedDir(t);
  // The control: the directory as compaction left it starts and serves the same users.
  const server = await startOn(t, dir);
  assert.equal(await listText(server), listing);
  await server.running.stop();
  const name = `snapshot-${generation}`;
  const path = join(dir, name);
  const bytes = readFileSync(path);
  bytes[HEADER_BYTES + 8 + 20]! ^= 0x02;
  writeFileSync(path, bytes);
  await assertRefused(t, dir, refusal(name, HEADER_BYTES, dir));
});

const headers: { name: string; damage: (bytes: Buffer) => Buffer; reason: string }[] = [
  {
    name: 'a garbled magic',
    damage: (b) => Buffer.concat([Buffer.from('GARBAGE!'), b.subarray(8)]),
    reason: 'not a users-server data file (bad magic)',
  },
  {
    name: 'a foreign file (text)',
    damage: () => Buffer.from('name,id\nAnn,1\n'.repeat(50)),
    reason: 'not a users-server data file (bad magic)',
  },
  {
    name: 'format version 0',
    damage: (b) => patch(b, 8, [0, 0]),
    reason: `format version 0; this server reads versions 1 to ${FORMAT_VERSION}`,
  },
  { name: 'the snapshot kind', damage: (b) => patch(b, 10, [2, 0]), reason: 'not a journal file' },
  {
    name: 'another generation',
    damage: (b) => patch(b, 12, [7, 0, 0, 0]),
    reason: 'its header says generation 7, its name 1',
  },
];

function patch(bytes: Buffer, at: number, values: number[]): Buffer {
  const copy = Buffer.from(bytes);
  for (const [i, v] of values.entries()) copy[at + i] = v;
  return copy;
}

for (const c of headers) {
  test(`recovery: a journal with ${c.name} in its header refuses the start at offset 0 with the reason, and changes nothing`, async (t) => {
    const f = await journalFixture();
    const dir = copyWith(t, f, c.damage(f.bytes));
    await assertRefused(
      t,
      dir,
      new RegExp(
        `^${JOURNAL} is damaged at byte offset 0 \\(${escape(c.reason)}\\)[^\\n]*; nothing was changed\\. Run: users-server repair --data ${escape(dir)}$`,
      ),
    );
  });
}

test('recovery: journals 1 and 3 without journal 2 refuse the start, naming the missing journal-00000002', async (t) => {
  const f = await journalFixture();
  const dir = copyWith(t, f, f.bytes);
  writeFileSync(join(dir, 'journal-00000003'), encodeHeader(FileKind.Journal, 3));
  await assertRefused(t, dir, refusal('journal-00000002', 0, dir));
});

test('recovery: a snapshot whose journal of the same generation is missing refuses the start, naming that journal', async (t) => {
  const { dir, generation } = await compactedDir(t);
  unlinkSync(join(dir, `journal-${generation}`));
  await assertRefused(t, dir, refusal(`journal-${generation}`, 0, dir));
});

test('recovery: a torn tail in a journal that is not the last one refuses the start (only the last journal can hold an unfinished write)', async (t) => {
  const f = await journalFixture();
  const cut = f.ends.at(-2)! + 5;
  const dir = copyWith(t, f, f.bytes.subarray(0, cut));
  writeFileSync(
    join(dir, 'journal-00000002'),
    Buffer.concat([encodeHeader(FileKind.Journal, 2), encodeRecord('p\t99\t\t{"name":"Later","id":99}')]),
  );
  await assertRefused(t, dir, refusal(JOURNAL, f.ends.at(-2)!, dir));
});

test('recovery: zero bytes followed by a valid record are corruption, not a torn tail: the start is refused', async (t) => {
  const f = await journalFixture();
  const dir = copyWith(
    t,
    f,
    Buffer.concat([f.bytes, Buffer.alloc(4096), encodeRecord('p\t99\t\t{"name":"Ghost","id":99}')]),
  );
  await assertRefused(t, dir, refusal(JOURNAL, f.bytes.length, dir, f.bytes.length + 4096));
});

// ---------------------------------------------------------------- a journal that is gone

const lostJournals: { name: string; lose: (dir: string) => void; what: string }[] = [
  { name: 'deleted', lose: (dir) => unlinkSync(join(dir, JOURNAL)), what: 'no journal or snapshot' },
  { name: 'truncated to 0 bytes', lose: (dir) => truncateSync(join(dir, JOURNAL), 0), what: `an empty ${JOURNAL}` },
];
for (const c of lostJournals) {
  test(`a journal ${c.name} in a directory whose secret shows it held users refuses the start (exit 1, one line saying what is missing and what to do), creates nothing, and never issues id 1 again`, async (t) => {
    const f = await journalFixture();
    const dir = copyWith(t, f, f.bytes);
    assert.ok(existsSync(join(dir, 'secret')), 'the fixture has its secret');
    c.lose(dir);
    const before = readdirSync(dir).sort();
    const run = await runUsersServer(['--port', '0', '--data', dir]);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(
      run.stderr,
      new RegExp(
        `^users-server: ${escape(dir)} holds its secret file from an earlier start but ${escape(c.what)}: .*Restore ${JOURNAL} .* from a backup; to start this directory empty on purpose, move its secret and admin-password files away first\n$`,
      ),
    );
    assert.deepEqual(readdirSync(dir).sort(), before, 'nothing was created');
  });
}

test('a new data directory holding only an accounts file (put there before the first start) starts empty', async (t) => {
  const dir = tempDir(t);
  writeAccountsFile(dir, [
    {
      name: 'reader1',
      role: 'reader',
      id: 'abcdefghijkl',
      created: new Date().toISOString(),
      password: await hashPassword('a long enough password', { cost: 1 }),
    },
  ]);
  assert.ok(existsSync(join(dir, 'accounts')));
  const server = await startOn(t, dir);
  assert.equal((await put(server.url, '/users/first', { name: 'First' })).headers.location, '/users/1');
});

test('--data under /proc (a pseudo file system) exits 1 at once with one line', async (t) => {
  if (!existsSync('/proc/self')) return t.skip('no /proc on this system');
  const run = await runUsersServer(['--port', '0', '--data', '/proc/self/users-data']);
  assert.equal(run.code, 1, run.stderr);
  assert.equal(
    run.stderr,
    'users-server: cannot create the data directory: /proc/self/users-data cannot be made there; give a path on a writable file system\n',
  );
});

test('--data naming a file, or a path through one, exits 1 with one line that says so, and leaves the file as it was', async (t) => {
  const file = join(tempDir(t), 'notes.txt');
  writeFileSync(file, 'keep me\n');
  const onFile = await runUsersServer(['--port', '0', '--data', file]);
  assert.equal(onFile.code, 1, onFile.stderr);
  assert.equal(
    onFile.stderr,
    `users-server: the data directory ${file} is a file, not a folder; give --data a folder\n`,
  );
  const through = await runUsersServer(['--port', '0', '--data', join(file, 'data')]);
  assert.equal(through.code, 1, through.stderr);
  assert.equal(
    through.stderr,
    `users-server: cannot create the data directory: a part of ${join(file, 'data')} is a file, not a folder; check the path\n`,
  );
  assert.equal(readFileSync(file, 'utf8'), 'keep me\n');
});

// ---------------------------------------------------------------- the real command

test('node bin/users-server.js: a flipped bit exits 1 with one stderr line naming the repair command; `users-server repair --data DIR` exits 3 (something dropped); the server then starts with every commit but the damaged one', async (t) => {
  const f = await journalFixture();
  const middle = Math.floor((f.ends.length - 1) / 2);
  const { bytes, offset, next } = flipped(f, middle, flips[0]!);
  const dir = copyWith(t, f, bytes);

  const refusedChild = spawnUsersServer(t, ['--port', '0', '--data', dir]);
  const refused = { code: (await refusedChild.exited).code, out: refusedChild.stdout(), err: refusedChild.stderr() };
  assert.equal(refused.code, 1, `exit code; stderr=${refused.err}`);
  assert.equal(refused.out, '');
  assert.equal(
    refused.err,
    `users-server: ${JOURNAL} is damaged at byte offset ${offset} (${TORN}), and valid records follow at offset ${next}; nothing was changed. Run: users-server repair --data ${dir}\n`,
  );
  assert.ok(readFileSync(join(dir, JOURNAL)).equals(bytes), 'the refused start changed the journal');

  const expected = await listingWithout(t, f, offset, next);
  const repair = spawnUsersServer(t, ['repair', '--data', dir]);
  assert.equal((await repair.exited).code, 3, `repair exit code; stderr=${repair.stderr()}`);
  assert.match(repair.stdout(), /^kept the original files in \S+\/repair-/m);
  assert.match(repair.stdout(), /the server can start again/);

  const server = await spawnServer(t, ['--port', '0', '--data', dir]);
  const list = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(list.text, expected);
  server.kill('SIGTERM');
  assert.equal((await server.exited).code, 0, server.stderr());
  assert.equal(beyondDataLine(server.stderr()), '');
});
