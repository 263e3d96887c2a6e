/**
 * The reference server of `npm run bench` (bench/reference-server.mjs), run
 * as a child process on port 0: its answers are checked so that the baseline
 * every ratio is measured against is known to do the work it claims.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { put, send } from './helpers.js';
import { spawnChild, type Child } from './processes.js';

const SCRIPT = join(fileURLToPath(new URL('..', import.meta.url)), 'bench', 'reference-server.mjs');
const LISTENING_LINE = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/;
const TEST_OPTIONS = {};

/** Starts the reference server with `args` and `--port 0`; stops it after the test, checking it exits 0. */
async function startReference(t: TestContext, args: string[] = []): Promise<string> {
  return (await startReferenceChild(t, args)).url;
}

async function startReferenceChild(t: TestContext, args: string[]): Promise<{ url: string; child: Child }> {
  const child = spawnChild(t, process.execPath, [SCRIPT, '--port', '0', ...args], {
    stop: async (c) => {
      c.kill('SIGTERM');
      assert.equal((await c.exited).code, 0, 'the reference server exits 0 on SIGTERM');
    },
  });
  return { url: (await child.waitForLine(LISTENING_LINE))[1]!, child };
}

test('reference server: a GET of an id never PUT answers 404', TEST_OPTIONS, async (t) => {
  const url = await startReference(t);
  const reply = await send(url, 'GET', '/users/1');
  assert.equal(reply.status, 404);
});

test(
  'reference server: a PUT creates (201) then replaces (200), and GET returns the stored {id,name}',
  TEST_OPTIONS,
  async (t) => {
    const url = await startReference(t);
    const created = await put(url, '/users/7', { name: 'Ada' });
    assert.equal(created.status, 201);
    assert.equal(created.headers['content-type'], 'application/json');
    assert.deepEqual(created.json(), { id: 7, name: 'Ada' });
    const replaced = await put(url, '/users/7', { name: 'Grace' });
    assert.equal(replaced.status, 200);
    assert.deepEqual(replaced.json(), { id: 7, name: 'Grace' });
    const read = await send(url, 'GET', '/users/7');
    assert.equal(read.status, 200);
    assert.equal(read.text, '{"id":7,"name":"Grace"}');
    assert.equal((await send(url, 'GET', '/users/8')).status, 404, 'other ids stay absent');
  },
);

const refused = [
  {
    name: 'reference server: a PUT whose name is not a string answers 422 and changes nothing',
    body: '{"name":5}',
    status: 422,
  },
  {
    name: 'reference server: a PUT without a name answers 422 and changes nothing',
    body: '{"nom":"Ada"}',
    status: 422,
  },
  { name: 'reference server: a PUT of a JSON non-object answers 422 and changes nothing', body: '"Ada"', status: 422 },
  {
    name: 'reference server: a PUT whose body is not JSON answers 400 and changes nothing',
    body: '{"name":',
    status: 400,
  },
];
for (const c of refused) {
  test(c.name, TEST_OPTIONS, async (t) => {
    const url = await startReference(t);
    assert.equal((await put(url, '/users/3', { name: 'Ada' })).status, 201);
    const reply = await send(url, 'PUT', '/users/3', { body: c.body, headers: { 'content-type': 'application/json' } });
    assert.equal(reply.status, c.status);
    const fresh = await send(url, 'PUT', '/users/4', { body: c.body, headers: { 'content-type': 'application/json' } });
    assert.equal(fresh.status, c.status);
    assert.equal((await send(url, 'GET', '/users/3')).text, '{"id":3,"name":"Ada"}');
    assert.equal((await send(url, 'GET', '/users/4')).status, 404);
  });
}

test('reference server: paths other than /users/<digits> answer 404 and other methods 405', TEST_OPTIONS, async (t) => {
  const url = await startReference(t);
  assert.equal((await put(url, '/users/1', { name: 'Ada' })).status, 201);
  for (const path of ['/', '/users', '/users/', '/users/ada', '/users/1/x', '/users/1?x=1']) {
    assert.equal((await send(url, 'GET', path)).status, 404, path);
  }
  const deleted = await send(url, 'DELETE', '/users/1');
  assert.equal(deleted.status, 405);
  assert.equal(deleted.headers.allow, 'GET, PUT');
  assert.equal((await send(url, 'GET', '/users/1')).status, 200, 'the refused DELETE changed nothing');
});

test('reference server --floor: every request answers 200 with the same constant body', TEST_OPTIONS, async (t) => {
  const url = await startReference(t, ['--floor']);
  const replies = [
    await send(url, 'GET', '/users/1'),
    await send(url, 'GET', '/users/999'),
    await send(url, 'GET', '/'),
    await put(url, '/users/2', { name: 'Ada' }),
    await send(url, 'DELETE', '/nothing'),
  ];
  for (const reply of replies) {
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['content-type'], 'application/json');
    assert.equal(reply.text, replies[0]!.text);
  }
  assert.equal(typeof replies[0]!.json().name, 'string');
});

test(
  "reference server --contract --log: X-Request-Id on every answer, the stored version's ETag, Content-Location on a replace, 400 for a body that is not UTF-8, and one access log line per answer",
  TEST_OPTIONS,
  async (t) => {
    const { url, child } = await startReferenceChild(t, ['--contract', '--log']);
    const created = await put(url, '/users/7', { name: 'Ada' });
    assert.equal(created.status, 201);
    assert.equal(created.headers.location, '/users/7');
    const replaced = await put(url, '/users/7', { name: 'Grace' });
    assert.equal(replaced.status, 200);
    assert.equal(replaced.headers['content-location'], '/users/7');
    const read = await send(url, 'GET', '/users/7');
    const tag = `"${createHash('sha256').update(read.text).digest('base64url').slice(0, 27)}"`;
    assert.equal(read.headers.etag, tag, 'the tag of the stored JSON, computed as users-server does');
    const notUtf8 = await send(url, 'PUT', '/users/7', {
      body: Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(notUtf8.status, 400);
    const missing = await send(url, 'GET', '/users/8');
    const replies = [created, replaced, read, notUtf8, missing];
    const ids = replies.map((r) => r.headers['x-request-id']);
    assert.equal(new Set(ids).size, 5, `five distinct request ids: ${ids.join(' ')}`);
    const line = await child.waitForLine(new RegExp(`^\\S+Z GET /users/8 404 \\d+\\.\\d\\dms \\d+B req=${ids[4]}$`));
    assert.ok(line, 'the last answer is logged with its id');
    for (const [i, reply] of replies.entries())
      assert.match(child.stdout(), new RegExp(` ${reply.status} [0-9.]+ms \\d+B req=${ids[i]}\\n`));
  },
);

test(
  'reference server without --contract sends none of it: no X-Request-Id, no ETag, no log line',
  TEST_OPTIONS,
  async (t) => {
    const { url, child } = await startReferenceChild(t, []);
    assert.equal((await put(url, '/users/1', { name: 'Ada' })).headers['x-request-id'], undefined);
    const read = await send(url, 'GET', '/users/1');
    assert.equal(read.headers.etag, undefined);
    assert.equal(read.headers['x-request-id'], undefined);
    assert.equal(child.stdout().trim().split('\n').length, 1, 'stdout has the listening line only');
  },
);
