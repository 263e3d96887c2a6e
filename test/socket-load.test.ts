/**
 * The socket load generator of `npm run bench:postgres` (test/socket-load.ts):
 * the answers it counts are the answers the server gave, so its req/s
 * figures are known to be true.
 */
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { AnswerReader, socketLoad } from './socket-load.js';
import { send, startTestServer } from './helpers.js';

const ANSWERS = [
  'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"id":1,"x"',
  'HTTP/1.1 304 Not Modified\r\nETag: "a"\r\n\r\n',
  'HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}',
  'HTTP/1.1 204 No Content\r\n\r\n',
  'HTTP/1.1 201 Created\r\nCONTENT-LENGTH:0\r\n\r\n',
].join('');

test('socket load: answers split at any byte are each counted once, with their status', () => {
  for (const size of [1, 2, 7, 40, ANSWERS.length]) {
    const reader = new AnswerReader();
    const bytes = Buffer.from(ANSWERS, 'latin1');
    let done = 0;
    for (let at = 0; at < bytes.length; at += size) done += reader.push(bytes.subarray(at, at + size));
    assert.equal(done, 5, `chunks of ${size} bytes`);
    assert.deepEqual(reader.statuses, { 200: 1, 304: 1, 404: 1, 204: 1, 201: 1 });
    assert.equal(reader.non2xx, 2);
  }
});

test('socket load: an answer it cannot frame ends the run with an error', () => {
  assert.throws(
    () => new AnswerReader().push(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n')),
    /without Content-Length/,
  );
  assert.throws(() => new AnswerReader().push(Buffer.from('HTTP/1.0 200 OK\r\n\r\n')), /not an HTTP\/1\.1 answer/);
});

test('socket load: against a real server, it counts the answers the server counted', async (t) => {
  const server = await startTestServer(t, { logFormat: 'off' });
  const created = await send(server.url, 'POST', '/users/new', {
    body: '{"name":"Ada"}',
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(created.status, 201);
  const path = `/users/${(created.json() as { id: number }).id}`;
  const requests = [
    { path },
    { path: '/users/999' },
    { method: 'PUT', path, headers: { 'content-type': 'application/json' }, body: '{"name":"Grace"}' },
  ];
  const result = await socketLoad({ url: server.url, connections: 3, seconds: 0.3, requests });
  assert.equal(result.errors, 0);
  assert.ok(result.requests > 0, 'answers were counted');
  const counted = (await send(server.url, 'GET', '/metrics')).text;
  const served = (status: number, method: string) =>
    Number(
      new RegExp(
        `users_server_requests_total\\{route="/users/:ref",method="${method}",status="${status}"\\} (\\d+)`,
      ).exec(counted)?.[1] ?? 0,
    );
  const fromServer = served(200, 'GET') + served(404, 'GET') + served(200, 'PUT');
  // The answers in flight when the run ended were given but not counted: at most one per connection.
  assert.ok(
    fromServer - result.requests >= 0 && fromServer - result.requests <= 3,
    `server ${fromServer}, load ${result.requests}`,
  );
  assert.equal(result.non2xx, result.statuses[404]);
  assert.equal((result.statuses[200] ?? 0) + (result.statuses[404] ?? 0), result.requests);
});

test('socket load: connections the server refuses are counted as errors once each, not opened again', async () => {
  const server = createServer();
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as AddressInfo;
  await new Promise((closed) => server.close(closed));
  const result = await socketLoad({
    url: `http://127.0.0.1:${port}`,
    connections: 4,
    seconds: 0.2,
    requests: [{ path: '/' }],
  });
  assert.deepEqual({ requests: result.requests, errors: result.errors }, { requests: 0, errors: 4 });
});
