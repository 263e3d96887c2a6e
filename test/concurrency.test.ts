/**
 * Concurrency (issue 6): no lost updates under If-Match (API.md PUT rule 6),
 * and a graceful stop under load (API.md "Server command line": SIGTERM lets
 * in-flight requests finish, flushes the store, exits 0).
 *
 * The SIGTERM test runs the real `node bin/users-server.js` as a child
 * process (test/processes.ts).
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { test } from 'node:test';
import { send, startTestServer, tempDir } from './helpers.js';
import { spawnServer } from './processes.js';
const CLIENTS = 64;

// ---------------------------------------------------------------- lost updates

test('PUT rule 6: 64 clients doing GET then PUT with If-Match on one user lose no update: the successful PUTs equal the final counter', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await send(server.url, 'PUT', '/users/counter', { json: { name: 'Counter', count: 0 } })).status, 201);
  const ATTEMPTS = 8;
  const written: number[] = [];
  let refused = 0;
  const client = async () => {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      // A little jitter, so the clients do not all read the same version every round.
      for (let turns = Math.floor(Math.random() * 8); turns > 0; turns--) await new Promise(setImmediate);
      const read = await send(server.url, 'GET', '/users/1');
      assert.equal(read.status, 200, read.text);
      const count = (read.json() as { count: number }).count;
      const etag = read.headers.etag as string;
      const attemptPut = await send(server.url, 'PUT', '/users/1', {
        json: { name: 'Counter', count: count + 1 },
        headers: { 'if-match': etag },
      });
      if (attemptPut.status === 200) {
        written.push(count + 1);
      } else {
        // Only a precondition failure may refuse it: someone else wrote in between.
        assert.equal(attemptPut.status, 412, attemptPut.text);
        refused++;
      }
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const final = (await send(server.url, 'GET', '/users/1')).json() as { count: number };
  t.diagnostic(`${written.length} PUTs succeeded, ${refused} were refused with 412`);
  assert.equal(final.count, written.length, 'the final counter equals the number of successful PUTs');
  // Each success wrote the next value: no two clients ever wrote over the same version.
  assert.deepEqual(
    [...written].sort((a, b) => a - b),
    Array.from({ length: written.length }, (_, i) => i + 1),
  );
  assert.equal(written.length + refused, CLIENTS * ATTEMPTS);
  assert.ok(refused > 0, 'the clients did contend (some PUT was refused)');
});

test('PUT rule 6: 64 clients doing GET then DELETE with If-Match on one user: exactly one DELETE succeeds', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await send(server.url, 'PUT', '/users/target', { json: { name: 'Target' } })).status, 201);
  const etag = (await send(server.url, 'GET', '/users/1')).headers.etag as string;
  const statuses = await Promise.all(
    Array.from(
      { length: CLIENTS },
      async () => (await send(server.url, 'DELETE', '/users/1', { headers: { 'if-match': etag } })).status,
    ),
  );
  assert.equal(statuses.filter((s) => s === 204).length, 1, `statuses: ${statuses.join(', ')}`);
  assert.ok(
    statuses.every((s) => s === 204 || s === 404 || s === 412),
    `statuses: ${statuses.join(', ')}`,
  );
});

// ---------------------------------------------------------------- SIGTERM under load

interface Outcome {
  path: string;
  body: string;
  /** The 2xx answer's body when acknowledged; undefined when the PUT failed at the client. */
  answer: string | undefined;
  error?: string;
}

/** One PUT over a keep-alive agent; resolves with its answer, or with the error that ended it. */
function putOnce(
  agent: Agent,
  base: string,
  path: string,
  body: string,
): Promise<{ status: number; text: string } | Error> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const req = request(
      {
        host: hostname,
        port,
        path,
        method: 'PUT',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (error) => resolve(error));
      },
    );
    req.on('error', (error) => resolve(error));
    req.end(body);
  });
}

test('SIGTERM during 64 concurrent PUTs (bin/users-server.js): every PUT is acknowledged and present after a restart, or failed at the client; the process exits 0', async (t) => {
  const data = tempDir(t, 'users-server-sigterm-');
  const server = await spawnServer(t, ['--port', '0', '--data', data]);
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });
  t.after(() => agent.destroy());

  const outcomes: Outcome[] = [];
  let acknowledged = 0;
  let signalled = false;
  let acknowledgedAfterSignal = 0;
  let onEnoughAcks: () => void = () => {};
  const enoughAcks = new Promise<void>((resolve) => (onEnoughAcks = resolve));
  // Each client creates users through its own aliases, one PUT after another, until a PUT fails.
  const client = async (i: number) => {
    for (let seq = 0; ; seq++) {
      const path = `/users/c${i}-${seq}`;
      const body = JSON.stringify({ name: `Client ${i}`, seq, pad: 'x'.repeat(seq % 7) });
      const result = await putOnce(agent, server.url, path, body);
      if (result instanceof Error) {
        outcomes.push({
          path,
          body,
          answer: undefined,
          error: (result as NodeJS.ErrnoException).code ?? result.message,
        });
        return;
      }
      assert.ok(result.status === 201, `${path}: ${result.status} ${result.text}`);
      outcomes.push({ path, body, answer: result.text });
      acknowledged++;
      if (signalled) acknowledgedAfterSignal++;
      if (acknowledged >= CLIENTS * 3) onEnoughAcks();
    }
  };
  const clients = Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
  await enoughAcks;
  const signalledAt = performance.now();
  signalled = true;
  server.kill('SIGTERM');
  await clients;
  const exit = await server.exited;
  const exitMs = performance.now() - signalledAt;

  const failed = outcomes.filter((o) => o.answer === undefined);
  t.diagnostic(
    `${outcomes.length} PUTs: ${acknowledged} acknowledged (${acknowledgedAfterSignal} after the SIGTERM), ${failed.length} failed at the client ` +
      `(${[...new Set(failed.map((o) => o.error))].join(', ')}); exit ${exit.code} after ${exitMs.toFixed(0)} ms`,
  );
  assert.equal(exit.signal, null, `killed by ${exit.signal}`);
  assert.equal(exit.code, 0, `exit code ${exit.code}; stderr=${server.stderr()}`);
  assert.equal(failed.length, CLIENTS, 'every client ended on one failed PUT');

  const restarted = await spawnServer(t, ['--port', '0', '--data', data]);
  let presentFailed = 0;
  for (const o of outcomes) {
    const read = await send(restarted.url, 'GET', o.path);
    if (o.answer !== undefined) {
      assert.equal(read.status, 200, `${o.path} was acknowledged but is missing after the restart`);
      assert.equal(read.text, o.answer, `${o.path}: the acknowledged representation`);
      const id = Number(String(read.headers['content-location']).slice('/users/'.length));
      assert.equal(read.text, JSON.stringify({ ...JSON.parse(o.body), id }), `${o.path}: the body sent, plus its id`);
    } else if (read.status === 200) {
      // Written but the answer was lost: allowed for a PUT that failed at the client, and it must be whole.
      presentFailed++;
      assert.equal(
        read.text,
        JSON.stringify({
          ...JSON.parse(o.body),
          id: Number(String(read.headers['content-location']).slice('/users/'.length)),
        }),
      );
    } else {
      assert.equal(read.status, 404, `${o.path}: failed at the client, then ${read.status} ${read.text}`);
    }
  }
  const list = (await send(restarted.url, 'GET', '/users?limit=1000')).json() as {
    items: unknown[];
    next: string | null;
  };
  assert.equal(list.next, null);
  assert.equal(list.items.length, acknowledged + presentFailed, 'no other user appeared');
  t.diagnostic(`${presentFailed} PUTs that failed at the client were stored anyway`);
  restarted.kill('SIGTERM');
  const second = await restarted.exited;
  assert.equal(second.code, 0, restarted.stderr());
});
