/**
 * The Host check (docs/api.md "The Host field"): a request whose Host, or
 * absolute-form target, names neither an address the server listens on, a
 * loopback name, nor an `--allowed-hosts` name is answered 421
 * misdirected-request and changes nothing. DNS rebinding is the attack: a
 * page of another site points its name at this server's address and sends
 * its own name, with a matching Origin.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { HostNames } from '../server/http/host-names.js';
import { parseConfig, type Config } from '../server/ops/config.js';
import { assertProblem, listText, put, send, startTestServer, tempDir, type Reply } from './helpers.js';
import { spawnServer } from './processes.js';
import { exchangeUntilClosed } from './raw-http.js';

const REBIND = 'rebind.attacker.example';

/** A request with `host` as its Host field (node's client sends what it is given). */
function withHost(
  base: string,
  method: string,
  path: string,
  host: string,
  options: { json?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  return send(base, method, path, { ...options, headers: { ...options.headers, host } });
}

async function seeded(t: TestContext, overrides: Partial<Config> = {}) {
  const server = await startTestServer(t, overrides);
  assert.equal((await put(server.url, '/users/alice', { name: 'Alice' })).status, 201);
  return { server, port: new URL(server.url).port };
}

const ALICE_LIST = '{"items":[{"name":"Alice","id":1}],"next":null}';

test('DNS rebinding: a PUT, a DELETE, a POST and a GET whose Host and Origin name another site are 421 misdirected-request and change nothing', async (t) => {
  const { server, port } = await seeded(t);
  const host = `${REBIND}:${port}`;
  const origin = { origin: `http://${host}` };
  const answers = [
    await withHost(server.url, 'PUT', '/users/1', host, { json: { name: 'Mallory' }, headers: origin }),
    await withHost(server.url, 'DELETE', '/users/1', host, { headers: origin }),
    await withHost(server.url, 'POST', '/users/new', host, { json: { name: 'Mallory' }, headers: origin }),
    await withHost(server.url, 'GET', '/users/1', host, { headers: origin }),
    await withHost(server.url, 'GET', '/users?limit=10', host, { headers: origin }),
  ];
  for (const answer of answers) {
    const doc = assertProblem(answer, 421, 'misdirected-request');
    assert.match(
      String(doc.detail),
      new RegExp(`"${REBIND.replaceAll('.', '\\.')}".*--allowed-hosts ${REBIND.replaceAll('.', '\\.')}`),
      'the detail names the host and the flag to set',
    );
    assert.equal(answer.text.includes('Alice'), false, 'no user is shown');
  }
  assert.equal(await listText(server), ALICE_LIST, 'nothing changed');
});

test('DNS rebinding: an absolute-form target naming another site is 421 whatever Host says, and changes nothing', async (t) => {
  const { server, port } = await seeded(t);
  const body = '{"name":"Mallory"}';
  const bytes = `PUT http://${REBIND}:${port}/users/1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
  const [answer] = await exchangeUntilClosed(t, server.url, bytes);
  assertProblem(answer!, 421, 'misdirected-request');
  const userinfo = await exchangeUntilClosed(
    t,
    server.url,
    `GET http://127.0.0.1@${REBIND}/users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
  );
  assertProblem(userinfo[0]!, 421, 'misdirected-request', 'userinfo is not the host');
  assert.equal(await listText(server), ALICE_LIST);
});

const LOOPBACK_NAMES = [
  '127.0.0.1',
  '127.0.0.1.',
  'localhost',
  'LocalHost',
  'localhost.',
  'api.localhost',
  'a.b.localhost.',
  '[::1]',
  '[0:0:0:0:0:0:0:1]',
];
const OTHER_NAMES = [
  REBIND,
  '127.0.0.1.attacker.example',
  'localhost.attacker.example',
  'localhostx',
  'x-localhost',
  '127.0.0.2',
  '[::2]',
  '192.0.2.1',
];

test('the default server answers Host of every loopback name, with a port or without, and an empty Host; any other name is 421', async (t) => {
  const { server, port } = await seeded(t);
  for (const name of LOOPBACK_NAMES) {
    for (const host of [name, `${name}:${port}`, `${name}:1`]) {
      assert.equal((await withHost(server.url, 'GET', '/users/1', host)).status, 200, host);
    }
  }
  const [empty] = await exchangeUntilClosed(
    t,
    server.url,
    'GET /users/1 HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n',
  );
  assert.equal(empty!.status, 200, 'an empty Host names no host');
  for (const name of OTHER_NAMES) {
    for (const host of [name, `${name}:${port}`])
      assertProblem(await withHost(server.url, 'GET', '/users/1', host), 421, 'misdirected-request', host);
  }
});

test('--allowed-hosts: its names are served in any case, with any port and a final dot; others are still 421, loopback names still served', async (t) => {
  const { server, port } = await seeded(t, { allowedHosts: ['users.example.org', '[2001:db8::1]', '192.0.2.7'] });
  for (const host of [
    'users.example.org',
    'Users.Example.ORG:443',
    'users.example.org.:8080',
    '[2001:db8::1]:8080',
    '[2001:DB8:0:0::1]',
    '192.0.2.7',
    `localhost:${port}`,
  ]) {
    assert.equal((await withHost(server.url, 'GET', '/users/1', host)).status, 200, host);
  }
  for (const host of ['other.example.org', 'a.users.example.org', `${REBIND}:${port}`, '[2001:db8::2]', '192.0.2.8']) {
    assertProblem(
      await withHost(server.url, 'PUT', '/users/1', host, { json: { name: 'Mallory' } }),
      421,
      'misdirected-request',
      host,
    );
  }
  assert.equal(await listText(server), ALICE_LIST);
});

test('--allowed-hosts *: any name is served', async (t) => {
  const { server, port } = await seeded(t, { allowedHosts: ['*'] });
  assert.equal((await withHost(server.url, 'GET', '/users/1', `${REBIND}:${port}`)).status, 200);
  assert.equal((await withHost(server.url, 'PUT', '/users/1', REBIND, { json: { name: 'Bob' } })).status, 200);
});

test('a server on 127.0.0.2 is served by its address; a server on 127.0.0.1 is not reached by that name', async (t) => {
  const other = await startTestServer(t, { host: '127.0.0.2' });
  const port = new URL(other.url).port;
  assert.equal((await withHost(other.url, 'GET', '/healthz', `127.0.0.2:${port}`)).status, 200);
  assert.equal((await send(other.url, 'GET', '/healthz')).status, 200, "node's client sends the URL's host");
  const loopback = await startTestServer(t);
  assertProblem(await withHost(loopback.url, 'GET', '/healthz', `127.0.0.2:${port}`), 421, 'misdirected-request');
});

test('a server on ::1 is served by its bracketed address, in any of its spellings', async (t) => {
  let server;
  try {
    server = await startTestServer(t, { host: '::1' });
  } catch (error) {
    return t.skip(`no IPv6 loopback here: ${(error as Error).message}`);
  }
  const port = new URL(server.url).port;
  assert.equal(server.url, `http://[::1]:${port}`);
  for (const host of [`[::1]:${port}`, '[::1]', `[0::1]:${port}`])
    assert.equal((await withHost(server.url, 'GET', '/healthz', host)).status, 200, host);
  assertProblem(await withHost(server.url, 'GET', '/healthz', `[::2]:${port}`), 421, 'misdirected-request');
});

test("a server on 0.0.0.0 is served by the machine's interface addresses and loopback names, not by another name", async (t) => {
  const own = Object.values(networkInterfaces())
    .flat()
    .find((info) => info !== undefined && info.family === 'IPv4' && !info.internal)?.address;
  const server = await startTestServer(t, { host: '0.0.0.0' });
  const port = new URL(server.url).port;
  assert.equal((await withHost(server.url, 'GET', '/healthz', `127.0.0.1:${port}`)).status, 200);
  assert.equal((await withHost(server.url, 'GET', '/healthz', `localhost:${port}`)).status, 200);
  assertProblem(await withHost(server.url, 'GET', '/healthz', `${REBIND}:${port}`), 421, 'misdirected-request');
  assert.equal(
    (await send(server.url, 'GET', '/healthz')).status,
    200,
    'the URL it prints, http://0.0.0.0:PORT, reaches it',
  );
  if (own === undefined) return t.skip('this machine has no IPv4 address but loopback');
  assert.equal((await withHost(server.url, 'GET', '/healthz', `${own}:${port}`)).status, 200, own);
});

test('HostNames on a wildcard address reads the interfaces again, at most once a second, for an address it does not know', () => {
  const addresses = ['192.0.2.5', '[fe80::1]'];
  let reads = 0;
  let now = 0;
  const names = new HostNames(
    { host: '::', allowedHosts: [] },
    () => (reads++, [...addresses]),
    () => now,
  );
  assert.equal(names.judge('192.0.2.5:8080'), 'allowed');
  assert.equal(names.judge('[FE80::1]'), 'allowed');
  assert.equal(names.judge('192.0.2.6'), 'misdirected');
  addresses.push('192.0.2.6');
  assert.equal(names.judge('192.0.2.6'), 'misdirected', 'read less than a second ago');
  assert.equal(reads, 1);
  now += 1000;
  assert.equal(names.judge('192.0.2.6'), 'allowed', 'read again');
  assert.equal(reads, 2);
  assert.equal(names.judge('192.0.2.7'), 'misdirected');
  assert.equal(reads, 2, 'not again within the second');
});

test('HostNames: each value judged in turn gets its own verdict, whatever was allowed before it', () => {
  const names = new HostNames({ host: '127.0.0.1', allowedHosts: [] }, () => []);
  const turns: [string, 'allowed' | 'malformed' | 'misdirected'][] = [
    ['127.0.0.1:8080', 'allowed'],
    ['127.0.0.1:8080', 'allowed'],
    ['users.example.org', 'misdirected'],
    ['a b', 'malformed'],
    ['localhost', 'allowed'],
    ['127.0.0.1:8080', 'allowed'],
    ['users.example.org', 'misdirected'],
    ['127.0.0.1:8080 ', 'malformed'],
    ['', 'allowed'],
    ['users.example.org', 'misdirected'],
  ];
  for (const [host, verdict] of turns) assert.equal(names.judge(host), verdict, JSON.stringify(host));
});

const JUDGED: {
  host: string;
  config?: Partial<Pick<Config, 'host' | 'allowedHosts'>>;
  verdict: 'allowed' | 'malformed' | 'misdirected';
}[] = [
  { host: 'localhost:8080', verdict: 'allowed' },
  { host: '', verdict: 'allowed' },
  { host: 'a b', verdict: 'malformed' },
  { host: 'me@127.0.0.1', verdict: 'malformed' },
  { host: ':8080', verdict: 'misdirected' },
  { host: '127.0.0.1:99999', verdict: 'allowed' },
  { host: '[::1]:', verdict: 'allowed' },
  { host: 'users.internal', config: { host: 'users.internal' }, verdict: 'allowed' },
  { host: 'USERS.internal.:1', config: { host: 'users.internal' }, verdict: 'allowed' },
  { host: '10.0.0.5', config: { host: 'users.internal' }, verdict: 'misdirected' },
  { host: '[2001:db8::1]', config: { host: '2001:db8::1' }, verdict: 'allowed' },
  { host: 'users.example.org', config: { allowedHosts: ['users.example.org'] }, verdict: 'allowed' },
  { host: 'users.example.org', config: { allowedHosts: ['*'] }, verdict: 'allowed' },
  { host: 'users.example.org', verdict: 'misdirected' },
];

for (const c of JUDGED) {
  test(`HostNames: Host ${JSON.stringify(c.host)} with ${JSON.stringify(c.config ?? {})} is ${c.verdict}`, () => {
    const names = new HostNames({ host: '127.0.0.1', allowedHosts: [], ...c.config }, () => []);
    assert.equal(names.judge(c.host), c.verdict);
  });
}

test('users-server --config FILE with "allowed-hosts" serves that name and refuses others, through the real binary', async (t) => {
  const path = join(tempDir(t), 'users.json');
  writeFileSync(path, JSON.stringify({ 'allowed-hosts': 'users.example.org', store: 'memory', port: 0 }));
  assert.deepEqual(parseConfig(['--config', path], {}).config.allowedHosts, ['users.example.org']);
  const server = await spawnServer(t, ['--config', path, '--log-format', 'off']);
  assert.equal((await withHost(server.url, 'GET', '/healthz', 'users.example.org')).status, 200);
  assertProblem(await withHost(server.url, 'GET', '/healthz', `${REBIND}:${server.port}`), 421, 'misdirected-request');
  assert.equal((await send(server.url, 'GET', '/healthz')).status, 200, 'its own address still');
});
