/**
 * Abusive clients (issue 19, "Denial of service"; docs/operations.md
 * "Abusive clients"): a connection that pipelines deeper than
 * PIPELINE_LIMIT, one whose answers go unread, and one host opening more
 * connections than --max-connections-per-client. Each is tested by its
 * mechanism (what is answered, what is closed, who is still served); the
 * figures under a flood of a thousand connections are measured by
 * bench/abuse-bench.ts, never asserted here.
 */
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { test, type TestContext } from 'node:test';
import { ANSWERS_PER_TURN, PIPELINE_LIMIT } from '../server/http/pipelining.js';
import { put, send, startTestServer, type TestServer } from './helpers.js';
import { exchangeUntilClosed, parseResponses, RawConnection } from './raw-http.js';
import { spawnServer } from './processes.js';

const GET = 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

test(`pipelining: ${PIPELINE_LIMIT} GETs in one write are all answered and the connection stays open`, async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  const connection = await RawConnection.open(t, server.url);
  connection.write(GET.repeat(PIPELINE_LIMIT));
  await connection.until(() => parseResponses(connection.text).length === PIPELINE_LIMIT);
  assert.ok(parseResponses(connection.text).every((a) => a.status === 200));
  connection.write(GET);
  await connection.until(
    () => parseResponses(connection.text).length === PIPELINE_LIMIT + 1,
    'one more answer on the same connection',
  );
});

test(`pipelining: ${PIPELINE_LIMIT * 40} GETs in one write: the first ${PIPELINE_LIMIT} are answered in order, the connection is closed at the next one, nothing after it is parsed, and the server serves others`, async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  let parsed = 0;
  server.running.server.on('request', () => parsed++);
  const answers = await exchangeUntilClosed(t, server.url, GET.repeat(PIPELINE_LIMIT * 40));
  assert.ok(answers.length <= PIPELINE_LIMIT, `${answers.length} answers`);
  // node read far more than that at once (up to 64 KiB, 1,500 of these GETs); it stopped parsing at the one past the
  // limit.
  assert.equal(parsed, PIPELINE_LIMIT + 1, 'requests parsed');
  assert.ok(answers.every((a) => a.status === 200 && a.text === '{"name":"Ann","id":1}'));
  assert.equal((await send(server.url, 'GET', '/users/1')).status, 200);
});

test(`pipelining: a connection's queued answers go out ${ANSWERS_PER_TURN} in a row, then the event loop turns (other connections are read and served in between)`, async (t) => {
  let release = () => {};
  let held = Promise.resolve();
  const scrypt = async (password: string, salt: Buffer, _params: unknown, length: number) => {
    await held;
    return Buffer.alloc(length, password.length + salt.length);
  };
  const server = await startTestServer(t, {}, { scrypt });
  await put(server.url, '/users/ann', { name: 'Ann' });
  held = new Promise<void>((resolve) => (release = resolve));
  // Every answer on the connection, in the order they finish; when the first (the login) ends, how
  // many have ended by the event loop's next turn: those answered in a row.
  const finished: number[] = [];
  let inARow: (count: number) => void = () => {};
  const answeredInARow = new Promise<number>((resolve) => (inARow = resolve));
  let parsed = 0;
  server.running.server.on('request', (_req, res) => {
    const n = parsed++;
    res.once('finish', () => {
      finished.push(n);
      if (n === 0) setImmediate(() => inARow(finished.length));
    });
  });
  const connection = await RawConnection.open(t, server.url);
  const login = `POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic ${Buffer.from('nobody:wrong').toString('base64')}\r\n\r\n`;
  connection.write(login + GET.repeat(20));
  await new Promise<void>((resolve) => server.running.server.on('request', () => parsed === 21 && resolve()));
  release();
  const count = await answeredInARow;
  assert.ok(count >= 1 && count <= ANSWERS_PER_TURN, `${count} answers in a row before the loop turned (of 21)`);
  await connection.until(
    () => connection.text.split('HTTP/1.1 ').length > 21 && connection.text.endsWith('"id":1}'),
    'all 21 answers',
  );
  assert.deepEqual(
    finished,
    Array.from({ length: 21 }, (_, i) => i),
    'in order',
  );
});

/**
 * Opens a connection from `localAddress` and resolves once it is connected, or with 'closed' if the server closes it
 * first.
 */
function open(t: TestContext, port: number, localAddress: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(socket));
    socket.once('error', reject);
    t.after(() => socket.destroy());
  });
}

test('--max-connections-per-client: one address past the limit is closed before anything is read; another address, and the same one after a close, are served', async (t) => {
  const server = await startTestServer(t, { maxConnectionsPerClient: 4 });
  const { port } = new URL(server.url);
  const held = await Promise.all(Array.from({ length: 4 }, () => open(t, Number(port), '127.0.0.1')));
  // The fifth connection is accepted by the kernel, then closed by the server without an answer.
  const fifth = await open(t, Number(port), '127.0.0.1');
  const received: Buffer[] = [];
  fifth.on('data', (chunk: Buffer) => received.push(chunk));
  fifth.on('error', () => {});
  fifth.write(GET);
  await new Promise((resolve) => fifth.once('close', resolve));
  assert.equal(Buffer.concat(received).length, 0, 'no answer on a connection past the limit');
  // Another host (all of 127/8 is this machine) is not affected.
  const other = await open(t, Number(port), '127.0.0.2');
  const answered = new Promise<string>((resolve) =>
    other.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))),
  );
  other.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  assert.match(await answered, /^HTTP\/1\.1 200 /);
  // A closed connection frees its place.
  held[0]!.destroy();
  await new Promise((resolve) => held[0]!.once('close', resolve));
  let reply;
  do reply = await send(server.url, 'GET', '/healthz').catch(() => undefined);
  while (reply === undefined);
  assert.equal(reply.status, 200);
  for (const socket of [...held, other]) socket.destroy();
});

/**
 * A connection that asks for PIPELINE_LIMIT - 1 pipelined GETs of the 400 KB
 * user /users/big (a few answers fill the kernel's buffers, then node's)
 * and never reads; its server side, and the unsent bytes when its timeout
 * fired.
 */
async function neverReading(t: TestContext, server: TestServer) {
  const serverSide = new Promise<Socket>((resolve) => server.running.server.once('connection', resolve));
  const { port } = new URL(server.url);
  // No 'data' listener: this client never reads.
  const client = await open(t, Number(port), '127.0.0.1');
  client.on('error', () => {});
  client.write('GET /users/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(PIPELINE_LIMIT - 1));
  const socket = await serverSide;
  let unsentAtTimeout = -1;
  socket.once('timeout', () => (unsentAtTimeout = socket.writableLength));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, closed, unsentAtTimeout: () => unsentAtTimeout };
}

test('answers left unread: a connection that never reads its answers is closed once nothing moves on it for the unread timeout, with the unsent bytes of one answer at most', async (t) => {
  const server = await startTestServer(t, { maxBody: 1_000_000 }, { timeouts: { unread: 300 } });
  assert.equal((await put(server.url, '/users/big', { name: 'Big', pad: 'x'.repeat(400_000) })).status, 201);
  const reader = await neverReading(t, server);
  await reader.closed;
  // Closed with an answer still unsent (not as an idle keep-alive), and never more than one answer held.
  const unsent = reader.unsentAtTimeout();
  assert.ok(unsent > 0 && unsent <= 410_000, `unsent bytes at the close: ${unsent}`);
  assert.equal((await send(server.url, 'GET', '/healthz')).status, 200, 'the server still serves');
});

test('a request the server is still working on is not cut by the unread timeout: nothing waits unsent on its connection', async (t) => {
  let release = () => {};
  let held = Promise.resolve();
  const scrypt = async (password: string, salt: Buffer, _params: unknown, length: number) => {
    await held;
    return Buffer.alloc(length, password.length + salt.length);
  };
  const server = await startTestServer(t, { maxBody: 1_000_000 }, { timeouts: { unread: 100 }, scrypt });
  assert.equal((await put(server.url, '/users/big', { name: 'Big', pad: 'x'.repeat(400_000) })).status, 201);
  // Hashes wait from now on (the admin's, at start, did not).
  held = new Promise<void>((resolve) => (release = resolve));
  const connection = new Promise<Socket>((resolve) => server.running.server.once('connection', resolve));
  const login = send(server.url, 'POST', '/login', {
    headers: { authorization: 'Basic ' + Buffer.from('nobody:wrong').toString('base64') },
  });
  const socket = await connection;
  // The unread timeout has passed once a connection that does not read is closed by it.
  const reader = await neverReading(t, server);
  await reader.closed;
  assert.ok(reader.unsentAtTimeout() > 0);
  assert.ok(!socket.destroyed, 'the connection of the request being worked on is still open');
  release();
  assert.equal((await login).status, 401);
});

/**
 * Sends one keep-alive GET /healthz on `socket` and resolves with the status line, or 'closed' if the server closes it
 * first.
 */
function ask(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n')) finish(text.slice(0, text.indexOf('\r\n')));
    };
    const finish = (line: string) => {
      socket.off('data', onData);
      resolve(line);
    };
    socket.on('data', onData);
    socket.once('close', () => finish('closed'));
    socket.on('error', () => {});
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
}

test('node bin/users-server.js with default flags: 256 keep-alive connections from one address are all served, none reset', async (t) => {
  const server = await spawnServer(t, ['--port', '0', '--store', 'memory', '--log-format', 'off']);
  const port = Number(new URL(server.url).port);
  const sockets = await Promise.all(Array.from({ length: 256 }, () => open(t, port, '127.0.0.1')));
  const first = await Promise.all(sockets.map(ask));
  const second = await Promise.all(sockets.map(ask));
  assert.deepEqual([...new Set([...first, ...second])], ['HTTP/1.1 200 OK']);
  for (const s of sockets) s.destroy();
});

test('--max-connections: one address holding thousands loses only its own newest connections; another address is served throughout, and the total stays at the limit', async (t) => {
  const server = await startTestServer(t, { maxConnections: 100 });
  const port = Number(new URL(server.url).port);
  const flood = await Promise.all(Array.from({ length: 300 }, () => open(t, port, '127.0.0.3')));
  const closed = flood.map(
    (s) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve()))),
  );
  // The flood's first connections are kept; every one past the limit was closed.
  const answers = await Promise.all(flood.slice(0, 90).map(ask));
  assert.deepEqual([...new Set(answers)], ['HTTP/1.1 200 OK']);
  await Promise.all(closed.slice(100));
  // A good client from another address gets in: the flood's newest connection makes room for it.
  for (let i = 0; i < 20; i++) {
    const good = await open(t, port, '127.0.0.2');
    assert.equal(await ask(good), 'HTTP/1.1 200 OK', `request ${i} of the other address`);
    good.destroy();
  }
  const connections = await new Promise<number>((resolve, reject) =>
    server.running.server.getConnections((e, n) => (e ? reject(e) : resolve(n))),
  );
  assert.ok(connections <= 100, `${connections} connections open`);
  for (const s of flood) s.destroy();
});

/** Why a dual-stack listener (`::`) cannot be had here (a machine or container without IPv6), or undefined. */
async function dualStackSkipReason(): Promise<string | undefined> {
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(`cannot listen on :: (${error.code}): no IPv6 here`));
    probe.listen(0, '::', () => probe.close(() => resolve(undefined)));
  });
}

// With --host ::, IPv4 clients arrive as IPv4-mapped IPv6 peers (::ffff:127.0.0.1): each is still an address of its
// own.
test('--host :: and --max-connections-per-client: an IPv4 address at the limit does not hold back another IPv4 address', async (t) => {
  const skip = await dualStackSkipReason();
  if (skip !== undefined) return t.skip(skip);
  const server = await startTestServer(t, { host: '::', maxConnectionsPerClient: 3 });
  const port = Number(new URL(server.url).port);
  const held = await Promise.all(Array.from({ length: 3 }, () => open(t, port, '127.0.0.1')));
  for (const other of ['127.0.0.2', '127.0.0.3']) {
    assert.equal(await ask(await open(t, port, other)), 'HTTP/1.1 200 OK', `${other} is served`);
  }
  assert.equal(await ask(await open(t, port, '127.0.0.1')), 'closed', 'the fourth of 127.0.0.1 is closed');
  for (const s of held) s.destroy();
});

test('--host :: and --max-connections: an IPv4 address flooding the server loses its own newest connections; other IPv4 addresses are served', async (t) => {
  const skip = await dualStackSkipReason();
  if (skip !== undefined) return t.skip(skip);
  const server = await startTestServer(t, { host: '::', maxConnections: 20 });
  const port = Number(new URL(server.url).port);
  const flood = await Promise.all(Array.from({ length: 20 }, () => open(t, port, '127.0.0.1')));
  for (let i = 0; i < 5; i++) {
    const good = await open(t, port, `127.0.0.${i + 2}`);
    assert.equal(await ask(good), 'HTTP/1.1 200 OK', `127.0.0.${i + 2} is served`);
    good.destroy();
  }
  for (const s of flood) s.destroy();
});
