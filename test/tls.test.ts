/**
 * HTTPS without a proxy (docs/operations.md "TLS"): --tls-cert and --tls-key
 * serve node:https, imply --cookie-secure, and are read again on SIGHUP;
 * checked with curl against self-signed certificates made by openssl.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { connect as connectTcp, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { PIPELINE_LIMIT } from '../server/http/pipelining.js';
import { ADMIN_PASSWORD, runUsersServer, startTestServer, tempDir } from './helpers.js';
import { runTool, spawnServer, spawnUsersctl } from './processes.js';
import { usersctl } from './cli-helpers.js';
import { EXIT } from '../cli/exit-codes.js';

const HAVE = ['openssl', 'curl'].find(
  (tool) => spawnSync(tool, ['--version']).error !== undefined && spawnSync(tool, ['version']).error !== undefined,
);

/** A self-signed certificate for localhost and 127.0.0.1, and its key, in `dir` as NAME.crt and NAME.key. */
async function certificate(t: TestContext, dir: string, name: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const made = await runTool(t, 'openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ]);
  assert.equal(made.code, 0, made.stderr);
  return { cert, key };
}

function curl(t: TestContext, ca: string, ...args: string[]) {
  return runTool(t, 'curl', ['-s', '--cacert', ca, ...args]);
}

test('node bin/users-server.js --tls-cert --tls-key: curl reaches it over HTTPS with the certificate as its CA, the session cookie is __Host- and Secure, and SIGHUP puts a new certificate in place (a broken one is refused, the old one kept)', async (t) => {
  if (HAVE !== undefined) return t.skip(`${HAVE} not found`);
  const dir = tempDir(t);
  const first = await certificate(t, dir, 'first');
  const second = await certificate(t, dir, 'second');
  const live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };
  copyFileSync(first.cert, live.cert);
  copyFileSync(first.key, live.key);
  const server = await spawnServer(t, [
    '--port',
    '0',
    '--data',
    join(dir, 'data'),
    '--tls-cert',
    live.cert,
    '--tls-key',
    live.key,
  ]);
  assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const health = await curl(t, first.cert, `${server.url}/healthz`);
  assert.equal(health.stdout, '{"status":"ok"}');
  const login = await curl(t, first.cert, '-i', '-u', `admin:${ADMIN_PASSWORD}`, '-X', 'POST', `${server.url}/login`);
  assert.match(
    login.stdout,
    /^set-cookie: __Host-USER_TOKEN=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+; Secure\r$/im,
  );
  assert.notEqual((await curl(t, second.cert, `${server.url}/healthz`)).code, 0, 'another CA is refused');

  copyFileSync(second.cert, live.cert);
  copyFileSync(second.key, live.key);
  server.kill('SIGHUP');
  await server.waitForLine(
    /^users-server: SIGHUP: TLS certificate and key read again; new connections use them$/,
    'stderr',
  );
  assert.equal(
    (await curl(t, second.cert, `${server.url}/healthz`)).stdout,
    '{"status":"ok"}',
    'the new certificate is served',
  );
  assert.notEqual((await curl(t, first.cert, `${server.url}/healthz`)).code, 0, 'the old one no longer');

  writeFileSync(live.key, 'not a key');
  server.kill('SIGHUP');
  await server.waitForLine(
    /^users-server: SIGHUP: the TLS certificate .* do not make a pair a server can use: .*; the previous certificate stays in use$/,
    'stderr',
  );
  assert.equal((await curl(t, second.cert, `${server.url}/healthz`)).stdout, '{"status":"ok"}', 'still served');
  server.kill('SIGTERM');
  assert.equal((await server.exited).code, 0);
});

test("--tls-cert without --tls-key is a usage error (exit 2); a key that is not the certificate's, or a missing file, stops the start with one sentence (exit 1)", async (t) => {
  if (HAVE !== undefined) return t.skip(`${HAVE} not found`);
  const dir = tempDir(t);
  const a = await certificate(t, dir, 'a');
  const b = await certificate(t, dir, 'b');
  const half = await runUsersServer(['--port', '0', '--data', join(dir, 'd1'), '--tls-cert', a.cert]);
  assert.equal(half.code, 2);
  assert.match(half.stderr, /HTTPS needs both --tls-cert and --tls-key/);
  const mismatch = await runUsersServer([
    '--port',
    '0',
    '--data',
    join(dir, 'd2'),
    '--tls-cert',
    a.cert,
    '--tls-key',
    b.key,
  ]);
  assert.equal(mismatch.code, 1);
  assert.match(
    mismatch.stderr,
    /^users-server: the TLS certificate .*a\.crt and key .*b\.key do not make a pair a server can use: check that both are PEM and that the key is the certificate's\n$/,
  );
  const missing = await runUsersServer([
    '--port',
    '0',
    '--data',
    join(dir, 'd3'),
    '--tls-cert',
    join(dir, 'none.crt'),
    '--tls-key',
    a.key,
  ]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /the TLS certificate: \S*none\.crt does not exist; check the path/);
});

test(`over HTTPS too, a connection pipelining past ${PIPELINE_LIMIT} requests is closed and nothing after the one past the limit is parsed`, async (t) => {
  if (HAVE !== undefined) return t.skip(`${HAVE} not found`);
  const { cert, key } = await certificate(t, tempDir(t), 'pipelining');
  const server = await startTestServer(t, { tlsCert: cert, tlsKey: key, cookieSecure: true });
  let parsed = 0;
  server.running.server.on('request', () => parsed++);
  const { port } = new URL(server.url);
  const socket = connectTls({ port: Number(port), host: '127.0.0.1', ca: readFileSync(cert), servername: 'localhost' });
  t.after(() => socket.destroy());
  socket.on('error', () => {});
  socket.resume();
  socket.write('GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(PIPELINE_LIMIT * 40));
  await new Promise((resolve) => socket.once('close', resolve));
  assert.equal(parsed, PIPELINE_LIMIT + 1, 'requests parsed');
});

test("usersctl with an http:// --url at users-server's HTTPS port: the connection closes with nothing read, and the sentence says to use https://, exit 7; with https:// and the certificate trusted, it reads the user", async (t) => {
  if (HAVE !== undefined) return t.skip(`${HAVE} not found`);
  const { cert, key } = await certificate(t, tempDir(t), 'localhost');
  const server = await startTestServer(t, { tlsCert: cert, tlsKey: key, cookieSecure: true });
  const port = new URL(server.url).port;
  const home = tempDir(t, 'usersctl-home-');
  const env = { HOME: home, XDG_STATE_HOME: home };
  const plain = await usersctl(['--retries', '0', '--url', `http://127.0.0.1:${port}`, 'get', '1'], { env });
  assert.equal(plain.code, EXIT.network);
  assert.equal(
    plain.stderr,
    `usersctl: the connection to 127.0.0.1:${port} was closed before the answer was complete; nothing came back: if the server speaks HTTPS there, use https:// in --url\n`,
  );
  // node reads NODE_EXTRA_CA_CERTS as it starts: node bin/usersctl.js, in a process of its own.
  const secure = spawnUsersctl(t, ['--url', `https://localhost:${port}`, 'get', '1'], {
    env: { PATH: process.env.PATH, ...env, NODE_EXTRA_CA_CERTS: cert },
  });
  assert.equal((await secure.exited).code, EXIT.notFound, secure.stderr());
  assert.equal(secure.stderr(), 'usersctl: 1: No such user.\n');
});

/** A raw TCP connection from 127.0.0.1 that writes `bytes` and nothing more; resolves when the server closes it. */
function stallHandshake(t: TestContext, port: number, bytes: Buffer): Promise<void> {
  const socket: Socket = connectTcp({ port, host: '127.0.0.1' }, () => socket.write(bytes));
  t.after(() => socket.destroy());
  socket.on('error', () => {});
  socket.resume();
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

/** The first 5 bytes of a TLS 1.2+ ClientHello: a handshake record's header, announcing 512 bytes that never come. */
const PARTIAL_CLIENT_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]);

test('over HTTPS, a connection that does not finish its handshake within the handshake timeout is closed (nothing sent, or 5 bytes of a ClientHello), and its place under --max-connections is free again', async (t) => {
  if (HAVE !== undefined) return t.skip(`${HAVE} not found`);
  const { cert, key } = await certificate(t, tempDir(t), 'handshake');
  const server = await startTestServer(
    t,
    { tlsCert: cert, tlsKey: key, cookieSecure: true, maxConnections: 2 },
    { timeouts: { handshake: 300 } },
  );
  const port = Number(new URL(server.url).port);
  await Promise.all([stallHandshake(t, port, Buffer.alloc(0)), stallHandshake(t, port, PARTIAL_CLIENT_HELLO)]);
  // Both places are free: a third connection of the same address would otherwise be the one closed.
  const socket = connectTls({ port, host: '127.0.0.1', ca: readFileSync(cert), servername: 'localhost' });
  t.after(() => socket.destroy());
  socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await new Promise((resolve, reject) => socket.once('end', resolve).once('error', reject));
  assert.match(Buffer.concat(chunks).toString('latin1'), /^HTTP\/1\.1 200 /);
});
