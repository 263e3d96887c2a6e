/**
 * The data directory's format across versions (docs/storage.md "Format
 * versions"). `test/fixtures/data-format-1/` was written by users-server
 * with data format 1 (before API tokens): a snapshot and a journal after it,
 * holding 40 users under aliases, a user with a non-ASCII field, a deleted
 * user, a moved id (--allow-id-change), a POST /users/new under an
 * Idempotency-Key, a live reservation and a revoked session. Every later
 * version must start on a copy of it and serve exactly that.
 */
import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { FORMAT_VERSION } from '../server/store/journal/codec.js';
import { listText, put, send, startTestServer, tempDir } from './helpers.js';

const FIXTURES = join(import.meta.dirname, 'fixtures');
/** Just after the fixture's last write: its reservation, Idempotency-Key and revoked session are live then. */
const WRITTEN_AT = Date.parse('2026-11-25T20:49:23Z');

function copyOfFixture(t: import('node:test').TestContext): string {
  const dir = join(tempDir(t), 'data');
  cpSync(join(FIXTURES, 'data-format-1'), dir, { recursive: true });
  return dir;
}

test(`data format 1 (test/fixtures/data-format-1): users-server (format ${FORMAT_VERSION}) starts on it, says it upgraded it, and serves every user, alias, deletion, move, reservation, Idempotency-Key and revoked session it holds`, async (t) => {
  const dir = copyOfFixture(t);
  const logs: string[] = [];
  const now = WRITTEN_AT;
  const server = await startTestServer(
    t,
    { data: dir, allowIdChange: true, requireSession: 'writes' },
    { clock: () => now, logError: (line) => logs.push(line) },
  );
  assert.deepEqual(logs, [
    `users-server: upgraded ${dir} from data format 1 to ${FORMAT_VERSION}: new writes go to journal-00000003; the older files are kept and read as they are until the next compaction rewrites them`,
  ]);
  assert.deepEqual(
    readdirSync(dir)
      .filter((n) => /^(journal|snapshot)-/.test(n))
      .sort(),
    ['journal-00000002', 'journal-00000003', 'snapshot-00000002'],
  );
  const url = server.url;
  assert.equal(
    await listText(server),
    readFileSync(join(FIXTURES, 'format-1-users.json'), 'utf8'),
    'the listing is the one format 1 served',
  );
  const alice = await send(url, 'GET', '/users/alice');
  assert.equal(alice.text, '{"name":"Alice","city":"Zürich","id":41}');
  assert.equal(alice.headers['content-location'], '/users/41');
  assert.equal((await send(url, 'GET', '/users/3')).status, 404, 'the deleted user');
  const cookie = await server.login();
  const headers = { cookie };
  assert.equal((await put(url, '/users/3', { name: 'Again' }, headers)).status, 410, 'a deleted id is never reused');
  const moved = await send(url, 'GET', '/users/5');
  assert.equal(moved.status, 301);
  assert.equal(moved.headers.location, '/users/100');
  const replay = await send(url, 'POST', '/users/new', {
    json: { name: 'Created once' },
    headers: { ...headers, 'idempotency-key': 'fixture-key-1' },
  });
  assert.equal(replay.status, 201);
  assert.equal(replay.headers['idempotent-replayed'], 'true');
  assert.equal(replay.text, '{"name":"Created once","id":42}');
  assert.equal(
    (await put(url, '/users/43', { name: 'Reserved' }, headers)).status,
    201,
    'the live reservation is used up',
  );
  const revoked = readFileSync(join(FIXTURES, 'format-1-revoked-session.txt'), 'utf8').trim();
  assert.equal(
    (await send(url, 'GET', '/', { headers: { cookie: `USER_TOKEN=${revoked}` } })).status,
    401,
    'the revoked session stays revoked',
  );
  const next = await send(url, 'POST', '/users/new', { json: { name: 'Next' }, headers });
  assert.equal(next.headers.location, '/users/44', 'ids go on after the highest one issued');

  // Written in format 2 now; a restart reads both formats and upgrades nothing more.
  const expected = await listText(server);
  await server.running.stop();
  const again: string[] = [];
  const restarted = await startTestServer(t, { data: dir }, { clock: () => now, logError: (line) => again.push(line) });
  assert.deepEqual(again, []);
  assert.equal(await listText(restarted), expected);
});

test('data format 1: after the upgrade a compaction rewrites the directory in the current format and removes the older files', async (t) => {
  const dir = copyOfFixture(t);
  const logs: string[] = [];
  const server = await startTestServer(
    t,
    { data: dir, compactionFloor: 4096 },
    { clock: () => WRITTEN_AT, logError: (line) => logs.push(line) },
  );
  for (let i = 0; !logs.some((l) => /^users-server: compacted /.test(l)); i++) {
    assert.ok(i < 400, `no compaction: ${logs.join('\n')}`);
    const reply = await put(server.url, `/users/u${(i % 40) + 1}`, {
      name: `User ${(i % 40) + 1}`,
      i,
      pad: 'y'.repeat(200),
    });
    assert.ok(reply.status === 200 || reply.status === 201, reply.text);
  }
  const files = readdirSync(dir)
    .filter((n) => /^(journal|snapshot)-/.test(n))
    .sort();
  assert.deepEqual(files, ['journal-00000004', 'snapshot-00000004']);
  for (const name of files)
    assert.equal(
      readFileSync(join(dir, name)).readUInt16LE(8),
      FORMAT_VERSION,
      `${name} is in format ${FORMAT_VERSION}`,
    );
  const expected = await listText(server);
  await server.running.stop();
  assert.equal(await listText(await startTestServer(t, { data: dir })), expected);
});
