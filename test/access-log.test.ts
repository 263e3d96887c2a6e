/**
 * The access log (docs/operations.md "Logs"): with --log-format text or
 * json, one line per answered request on stdout with time, method, path,
 * status, duration, body bytes and request id; nothing with off (the
 * default). Lines are handed over in batches and flushed on stop.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test, type TestContext } from 'node:test';
import { AccessLog, escapeTarget, FLUSH_BYTES, MAX_TARGET } from '../server/ops/access-log.js';
import { ServerUsageError } from '../server/errors.js';
import { parseConfig, type Config } from '../server/ops/config.js';
import { put, rawExchange, send, startTestServer, tempDir, type TestServer } from './helpers.js';
import { beyondDataLine, spawnServer } from './processes.js';

/** 2026-11-23T12:00:00.000Z, the injected clock of these tests. */
const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);
const TIME = '2026-11-23T12:00:00.000Z';
const TEXT_LINE = /^(\S+) (\S+) (\S+) (\d{3}) (\d+\.\d\d)ms (\d+)B req=(\S+)$/;

interface Logged {
  server: TestServer;
  /** Every chunk the sink received so far. */
  chunks: string[];
  /** Stops the server (which flushes the log) and returns the lines. */
  lines(): Promise<string[]>;
}

/** A server whose access log goes to an array, with the clock fixed at NOW. */
async function logged(
  t: TestContext,
  logFormat: Config['logFormat'],
  overrides: Partial<Config> = {},
): Promise<Logged> {
  const chunks: string[] = [];
  const server = await startTestServer(
    t,
    { logFormat, ...overrides },
    { accessLog: (chunk) => chunks.push(chunk), clock: () => NOW },
  );
  return {
    server,
    chunks,
    async lines() {
      await server.running.stop();
      return chunks.join('').split('\n').slice(0, -1);
    },
  };
}

function textFields(line: string) {
  const m = TEXT_LINE.exec(line);
  assert.ok(m !== null, `not an access log line: ${JSON.stringify(line)}`);
  return {
    time: m[1]!,
    method: m[2]!,
    path: m[3]!,
    status: Number(m[4]),
    ms: Number(m[5]),
    bytes: Number(m[6]),
    id: m[7]!,
  };
}

test('--log-format text writes one line per request: time, method, path with query, status, duration, body bytes and the X-Request-Id sent', async (t) => {
  const log = await logged(t, 'text');
  const created = await put(log.server.url, '/users/alice', { name: 'Alice' });
  const read = await send(log.server.url, 'GET', '/users/1?x=1');
  const missing = await send(log.server.url, 'GET', '/nope');
  const head = await send(log.server.url, 'HEAD', '/users/1');
  const lines = (await log.lines()).map(textFields);
  const expected = [
    { method: 'PUT', path: '/users/alice', reply: created, bytes: created.text.length },
    { method: 'GET', path: '/users/1?x=1', reply: read, bytes: read.text.length },
    { method: 'GET', path: '/nope', reply: missing, bytes: missing.text.length },
    { method: 'HEAD', path: '/users/1', reply: head, bytes: 0 },
  ];
  assert.equal(lines.length, expected.length, JSON.stringify(lines));
  expected.forEach((e, i) => {
    const line = lines[i]!;
    assert.equal(line.time, TIME);
    assert.equal(line.method, e.method);
    assert.equal(line.path, e.path);
    assert.equal(line.status, e.reply.status);
    assert.equal(line.bytes, e.bytes, `bytes of ${e.method} ${e.path}`);
    assert.equal(line.id, e.reply.headers['x-request-id']);
    assert.ok(line.ms >= 0);
  });
  assert.equal(lines[0]!.bytes, Number(created.headers['content-length']));
});

test('--log-format json writes one JSON object per line with exactly the keys time, method, path, status, ms, bytes, id', async (t) => {
  const log = await logged(t, 'json');
  const created = await put(log.server.url, '/users/alice', { name: 'Alice' });
  const refused = await send(log.server.url, 'DELETE', '/users/new');
  const lines = await log.lines();
  assert.equal(lines.length, 2);
  const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  for (const entry of entries)
    assert.deepEqual(Object.keys(entry), ['time', 'method', 'path', 'status', 'ms', 'bytes', 'id']);
  assert.deepEqual(
    { ...entries[0], ms: 0 },
    {
      time: TIME,
      method: 'PUT',
      path: '/users/alice',
      status: 201,
      ms: 0,
      bytes: created.text.length,
      id: created.headers['x-request-id'],
    },
  );
  assert.deepEqual(
    { ...entries[1], ms: 0 },
    {
      time: TIME,
      method: 'DELETE',
      path: '/users/new',
      status: 405,
      ms: 0,
      bytes: refused.text.length,
      id: refused.headers['x-request-id'],
    },
  );
  assert.equal(typeof entries[0]!.ms, 'number');
});

test('--log-format off writes nothing, and the requests are still answered; text is the default', async (t) => {
  assert.equal(parseConfig([], {}).config.logFormat, 'text');
  const log = await logged(t, 'off');
  assert.equal((await put(log.server.url, '/users/alice', { name: 'Alice' })).status, 201);
  assert.equal((await send(log.server.url, 'GET', '/users/1')).status, 200);
  assert.deepEqual(await log.lines(), []);
  assert.deepEqual(log.chunks, []);
});

const formatCases: { name: string; argv: string[]; env: NodeJS.ProcessEnv; expected: Config['logFormat'] }[] = [
  { name: '--log-format json', argv: ['--log-format', 'json'], env: {}, expected: 'json' },
  { name: 'USERS_LOG_FORMAT=text', argv: [], env: { USERS_LOG_FORMAT: 'text' }, expected: 'text' },
  {
    name: '--log-format off beats USERS_LOG_FORMAT=json',
    argv: ['--log-format', 'off'],
    env: { USERS_LOG_FORMAT: 'json' },
    expected: 'off',
  },
];
for (const c of formatCases) {
  test(`Server command line: ${c.name} sets the access log format`, () => {
    assert.equal(parseConfig(c.argv, c.env).config.logFormat, c.expected);
  });
}

for (const bad of ['TEXT', 'yaml', '']) {
  test(`Server command line: --log-format "${bad}" is a bad value`, () => {
    assert.throws(() => parseConfig(['--log-format', bad], {}), ServerUsageError);
  });
}

test('the logged path is the target as received, query included, with quotes and backslashes written as \\xNN', async (t) => {
  const log = await logged(t, 'text');
  const reply = await send(log.server.url, 'GET', '/users/%00?q="a\\b"');
  assert.equal(reply.status, 400);
  const [line] = await log.lines();
  assert.equal(textFields(line!).path, '/users/%00?q=\\x22a\\x5Cb\\x22');
});

test('the json format keeps escaped paths valid JSON: the value reads back as the \\xNN text', async (t) => {
  const log = await logged(t, 'json');
  assert.equal((await send(log.server.url, 'GET', '/x?"\\')).status, 404);
  const [line] = await log.lines();
  assert.equal((JSON.parse(line!) as { path: string }).path, '/x?\\x22\\x5C');
});

test(`a target longer than ${MAX_TARGET} characters is logged cut at ${MAX_TARGET}, followed by "..."`, async (t) => {
  const log = await logged(t, 'text');
  const long = '/' + 'a'.repeat(3000);
  assert.equal((await send(log.server.url, 'GET', long)).status, 404);
  const [line] = await log.lines();
  assert.equal(textFields(line!).path, long.slice(0, MAX_TARGET) + '...');
});

test('a response cut off because the client closed the connection is logged with status 499 and 0 bytes', async (t) => {
  const log = await logged(t, 'text');
  const { hostname, port } = new URL(log.server.url);
  const arrived = new Promise<void>((resolve) => log.server.running.server.once('request', () => resolve()));
  // A PUT whose body never arrives: the handler waits for it; the client leaves.
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  socket.write(
    'PUT /users/alice HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na',
  );
  await arrived;
  socket.destroy();
  // Stopping waits for the server to see the connection close, then flushes.
  const lines = (await log.lines()).map(textFields);
  // node:http's parser also reports the body cut short: a raw 400, logged on its own line ("-").
  assert.deepEqual(
    lines.filter((l) => l.method !== '-').map((l) => [l.method, l.path, l.status, l.bytes]),
    [['PUT', '/users/alice', 499, 0]],
    `lines: ${JSON.stringify(lines)}`,
  );
});

test('an error answered by the HTTP parser is logged with "-" for method and path, its status, and the X-Request-Id of its raw response', async (t) => {
  const log = await logged(t, 'text');
  const answer = await rawExchange(log.server.url, 'NOT HTTP AT ALL\r\n\r\n');
  const id = /\r\nX-Request-Id: (\S+)\r\n/.exec(answer)?.[1];
  assert.ok(id !== undefined, `no X-Request-Id in ${JSON.stringify(answer)}`);
  const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  const [line] = await log.lines();
  const fields = textFields(line!);
  assert.deepEqual(
    [fields.method, fields.path, fields.status, fields.bytes, fields.id],
    ['-', '-', 400, Buffer.byteLength(body), id],
  );
});

test('lines written in one turn of the event loop reach the sink in one chunk, at the next turn', async () => {
  const chunks: string[] = [];
  const log = new AccessLog(
    'text',
    (chunk) => chunks.push(chunk),
    () => NOW,
  );
  for (let i = 0; i < 5; i++)
    log.record({ method: 'GET', target: `/users/${i}`, status: 200, ms: 0.5, bytes: 10, id: `r${i}` });
  assert.equal(chunks.length, 0, 'nothing is written during the turn');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(chunks.length, 1);
  assert.deepEqual(
    chunks[0]!.split('\n'),
    [0, 1, 2, 3, 4].map((i) => `${TIME} GET /users/${i} 200 0.50ms 10B req=r${i}`).concat(''),
  );
});

test('the time of each line is toISOString of its millisecond, across milliseconds, seconds, days and before 1970', () => {
  const moments = [
    NOW,
    NOW + 1,
    NOW + 9,
    NOW + 10,
    NOW + 99,
    NOW + 100,
    NOW + 999,
    NOW + 1000,
    NOW + 1000.7,
    NOW + 86_399_999,
    NOW + 86_400_000,
    NOW,
    0,
    -1,
    -999,
    -1000,
    -1001,
    951_782_400_000,
  ];
  let now = 0;
  const chunks: string[] = [];
  const log = new AccessLog(
    'text',
    (chunk) => chunks.push(chunk),
    () => now,
  );
  for (const moment of moments) {
    now = moment;
    log.record({ method: 'GET', target: '/', status: 200, ms: 0, bytes: 0, id: 'r' });
    log.flush();
    assert.equal(chunks.at(-1)!.split(' ')[0], new Date(Math.floor(moment)).toISOString(), `clock at ${moment}`);
  }
});

test(`pending lines are handed over as soon as they reach ${FLUSH_BYTES} bytes, each chunk made of whole lines`, async () => {
  const chunks: string[] = [];
  const log = new AccessLog(
    'json',
    (chunk) => chunks.push(chunk),
    () => NOW,
  );
  const target = '/' + 'x'.repeat(1000);
  const count = Math.ceil((2.5 * FLUSH_BYTES) / target.length);
  for (let i = 0; i < count; i++) log.record({ method: 'GET', target, status: 404, ms: 1, bytes: 0, id: String(i) });
  assert.equal(chunks.length, 2, 'two chunks of 64 KiB were handed over within the turn');
  for (const chunk of chunks) assert.ok(chunk.length >= FLUSH_BYTES && chunk.length < FLUSH_BYTES + 2 * target.length);
  log.flush();
  const lines = chunks.join('').split('\n');
  assert.equal(lines.pop(), '', 'every chunk ends with a whole line');
  assert.deepEqual(
    lines.map((line) => (JSON.parse(line) as { id: string }).id),
    Array.from({ length: count }, (_, i) => String(i)),
  );
});

const escapeCases: { name: string; target: string; text: string }[] = [
  { name: 'a plain path and query', target: '/users?limit=2&after=1', text: '/users?limit=2&after=1' },
  { name: 'a control character', target: '/a\x01b', text: '/a\\x01b' },
  { name: 'DEL and a C1 control', target: '/\x7f\x85', text: '/\\x7F\\x85' },
  { name: 'a space, a quote and a backslash', target: '/a b"c\\', text: '/a\\x20b\\x22c\\x5C' },
  { name: 'a character beyond latin1 (not from the parser)', target: '/\u20ac', text: '/\\u20AC' },
];
for (const c of escapeCases) {
  test(`escapeTarget: ${c.name}`, () => {
    assert.equal(escapeTarget(c.target), c.text);
    assert.equal(JSON.parse(`"${escapeTarget(c.target, true)}"`), c.text);
  });
}

// ---------------------------------------------------------------- the real command

test('node bin/users-server.js --log-format json prints "listening on", then one JSON line per request on stdout, flushed by SIGTERM', async (t) => {
  const child = await spawnServer(t, ['--port', '0', '--data', tempDir(t), '--log-format', 'json']);
  const health = await send(child.url, 'GET', '/healthz', { headers: { 'x-request-id': 'probe-1' } });
  assert.equal(health.status, 200);
  child.kill('SIGTERM');
  assert.equal((await child.exited).code, 0, `stderr: ${child.stderr()}`);
  const out = child.stdout();
  const err = child.stderr();
  const lines = out.split('\n');
  assert.equal(lines.pop(), '');
  assert.match(lines[0]!, /^listening on /);
  assert.equal(lines.length, 2, `stdout: ${out}`);
  const entry = JSON.parse(lines[1]!) as Record<string, unknown>;
  assert.deepEqual(
    { ...entry, time: '', ms: 0 },
    { time: '', method: 'GET', path: '/healthz', status: 200, ms: 0, bytes: health.text.length, id: 'probe-1' },
  );
  assert.ok(
    Math.abs(Date.parse(entry.time as string) - Date.now()) < 60_000,
    `time ${String(entry.time)} is the wall clock`,
  );
  assert.equal(beyondDataLine(err), '');
});
