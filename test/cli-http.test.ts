import assert from 'node:assert/strict';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { maskSetCookie, retryAfterMs } from '../cli/client.js';
import { tempDir } from './helpers.js';
import {
  closedPortUrl,
  lines,
  sendJsonText,
  sendProblem,
  startStub,
  usersctl,
  type RunOptions,
} from './cli-helpers.js';

// The HTTP client against stub servers: retries only where safe, Retry-After,
// exit codes 6 and 7, timeouts, keep-alive.

function runAt(t: import('node:test').TestContext, url: string) {
  const home = tempDir(t, 'usersctl-home-');
  return (args: readonly string[], options: RunOptions = {}) =>
    usersctl(['--url', url, ...args], { ...options, env: { HOME: home, XDG_STATE_HOME: home, ...options.env } });
}

const USER = '{"name":"Alice","id":1}';

test('a GET answered 503 is retried and succeeds on the next attempt', async (t) => {
  const stub = await startStub(t, (_req, res, n) =>
    n === 0 ? sendProblem(res, 503, 'busy', { 'retry-after': '0' }) : sendJsonText(res, 200, USER),
  );
  const result = await runAt(t, stub.url)(['get', 'alice']);
  assert.deepEqual(result, { code: EXIT.ok, stdout: USER + '\n', stderr: '' });
  assert.equal(stub.requests.length, 2);
});

test("a server error that outlasts the retries exits 6 with the server's detail, after 1 + --retries attempts", async (t) => {
  const stub = await startStub(t, (_req, res) =>
    sendProblem(res, 503, 'The store is down for maintenance.', { 'retry-after': '0' }),
  );
  const result = await runAt(t, stub.url)(['--retries', '2', 'get', 'alice']);
  assert.equal(result.code, EXIT.server);
  assert.deepEqual(lines(result.stderr), ['usersctl: The store is down for maintenance.']);
  assert.equal(stub.requests.length, 3);
});

test('--retries 0 makes exactly one attempt', async (t) => {
  const stub = await startStub(t, (_req, res) => sendProblem(res, 502, 'bad gateway'));
  const result = await runAt(t, stub.url)(['--retries', '0', 'get', 'alice']);
  assert.equal(result.code, EXIT.server);
  assert.equal(stub.requests.length, 1);
});

const retryCases: Array<{ name: string; status: number; args: string[]; method: string; retried: boolean }> = [
  { name: 'GET on 500', status: 500, args: ['get', 'a'], method: 'GET', retried: true },
  { name: 'PUT on 500', status: 500, args: ['put', 'a', '--name', 'A'], method: 'PUT', retried: true },
  { name: 'DELETE on 504', status: 504, args: ['delete', 'a'], method: 'DELETE', retried: true },
  { name: 'GET on 408', status: 408, args: ['get', 'a'], method: 'GET', retried: true },
  { name: 'GET on 429', status: 429, args: ['get', 'a'], method: 'GET', retried: true },
  {
    name: 'POST with an Idempotency-Key on 503',
    status: 503,
    args: ['new', '--name', 'A'],
    method: 'POST',
    retried: true,
  },
  {
    name: 'POST with an Idempotency-Key on 500',
    status: 500,
    args: ['new', '--name', 'A'],
    method: 'POST',
    retried: false,
  },
  {
    name: 'a bare POST (login) on 503',
    status: 503,
    args: ['login', '--password-stdin'],
    method: 'POST',
    retried: false,
  },
  { name: 'a bare POST (logout) on 502', status: 502, args: ['logout'], method: 'POST', retried: false },
  { name: 'GET on 501', status: 501, args: ['get', 'a'], method: 'GET', retried: false },
  { name: 'PUT on 409', status: 409, args: ['put', 'a', '--name', 'A'], method: 'PUT', retried: false },
];

for (const c of retryCases) {
  test(`retry policy: ${c.name} is ${c.retried ? '' : 'not '}retried`, async (t) => {
    const stub = await startStub(t, (_req, res) =>
      sendProblem(res, c.status, `status ${c.status}`, { 'retry-after': '0' }),
    );
    const result = await runAt(t, stub.url)(['--retries', '2', ...c.args], { stdin: 'pw\n' });
    assert.equal(stub.requests.length, c.retried ? 3 : 1, result.stderr);
    assert.ok(stub.requests.every((r) => r.method === c.method));
    assert.equal(result.code, c.status >= 500 ? EXIT.server : EXIT.conflict);
  });
}

test('every retry of new sends the same Idempotency-Key, and a later new sends another', async (t) => {
  const stub = await startStub(t, (_req, res, n) =>
    n < 2 ? sendProblem(res, 503, 'busy', { 'retry-after': '0' }) : sendJsonText(res, 201, USER),
  );
  const run = runAt(t, stub.url);
  assert.equal((await run(['new', '--name', 'Alice'])).code, EXIT.ok);
  assert.equal((await run(['new', '--name', 'Alice'])).code, EXIT.ok);
  const keys = stub.requests.map((r) => r.headers['idempotency-key']);
  assert.equal(keys.length, 4);
  assert.ok(typeof keys[0] === 'string' && keys[0] !== '');
  assert.equal(keys[1], keys[0]);
  assert.equal(keys[2], keys[0]);
  assert.notEqual(keys[3], keys[0]);
});

test('a 409 "idempotency request in progress" is retried: the earlier attempt is still running', async (t) => {
  const stub = await startStub(t, (_req, res, n) => {
    if (n > 0) return sendJsonText(res, 201, USER);
    const body = JSON.stringify({
      type: 'tag:users-server,2026:problem/idempotency-in-progress',
      title: 't',
      status: 409,
      detail: 'in progress',
    });
    res.writeHead(409, { 'content-type': 'application/problem+json', 'retry-after': '0' });
    res.end(body);
  });
  const result = await runAt(t, stub.url)(['new', '--name', 'Alice']);
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.equal(stub.requests.length, 2);
});

test('Retry-After is honoured: -v shows the wait it asked for instead of the backoff', async (t) => {
  const stub = await startStub(t, (_req, res, n) =>
    n === 0 ? sendProblem(res, 429, 'slow down', { 'retry-after': '1' }) : sendJsonText(res, 200, USER),
  );
  const result = await runAt(t, stub.url)(['-v', 'get', 'alice']);
  assert.equal(result.code, EXIT.ok);
  assert.match(result.stderr, /^\* 429 Too Many Requests; retry 1 of 3 in 1000 ms$/m);
});

test('a Retry-After beyond 30 s is not waited for: the failure is reported at once', async (t) => {
  const stub = await startStub(t, (_req, res) =>
    sendProblem(res, 503, 'Too many live reservations.', { 'retry-after': '3600' }),
  );
  const result = await runAt(t, stub.url)(['reserve']);
  assert.equal(result.code, EXIT.server);
  assert.deepEqual(lines(result.stderr), ['usersctl: Too many live reservations.']);
  assert.equal(stub.requests.length, 1);
});

test('Retry-After: delay-seconds and HTTP-date both give milliseconds; garbage gives none', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(retryAfterMs('7', now), 7000);
  assert.equal(retryAfterMs('0', now), 0);
  assert.equal(retryAfterMs('Thu, 01 Jan 2026 00:00:03 GMT', now), 3000);
  assert.equal(retryAfterMs('Wed, 31 Dec 2025 23:00:00 GMT', now), 0);
  assert.equal(retryAfterMs('soon', now), undefined);
  assert.equal(retryAfterMs('-5', now), undefined);
  assert.equal(retryAfterMs(undefined, now), undefined);
});

test('Set-Cookie masking keeps the name and attributes and hides only the value', () => {
  assert.equal(maskSetCookie('USER_TOKEN=abc.def; Path=/; HttpOnly'), 'USER_TOKEN=***; Path=/; HttpOnly');
  assert.equal(maskSetCookie('USER_TOKEN=; Max-Age=0'), 'USER_TOKEN=***; Max-Age=0');
});

test('connection refused exits 7 with one line naming the URL', async (t) => {
  const url = await closedPortUrl();
  const result = await runAt(t, url)(['--retries', '0', 'get', 'alice']);
  assert.equal(result.code, EXIT.network);
  assert.deepEqual(lines(result.stderr), [`usersctl: cannot connect to ${url}: connection refused`]);
});

test('a bare POST is retried when the connection was refused: the request never left', async (t) => {
  const url = await closedPortUrl();
  const result = await runAt(t, url)(['-v', '--retries', '2', 'login', '--password-stdin'], { stdin: 'pw' });
  assert.equal(result.code, EXIT.network);
  assert.equal(result.stderr.match(/^\* cannot connect .*; retry \d of 2 in \d+ ms$/gm)?.length, 2, result.stderr);
});

test('a server that does not answer within --timeout exits 7', async (t) => {
  const stub = await startStub(t, () => {}); // never answers
  const result = await runAt(t, stub.url)(['--timeout', '0.2', '--retries', '0', 'get', 'alice']);
  assert.equal(result.code, EXIT.network);
  assert.deepEqual(lines(result.stderr), [`usersctl: ${new URL(stub.url).host} did not answer within 0.2 s`]);
});

test('a server that trickles its answer, each byte within --timeout but never the whole, is cut --timeout after the head: exit 7', async (t) => {
  const stub = await startStub(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    const drip = setInterval(() => res.write(' '), 50);
    res.on('close', () => clearInterval(drip));
  });
  const result = await runAt(t, stub.url)(['--timeout', '0.5', '--retries', '0', 'get', 'alice']);
  assert.equal(result.code, EXIT.network);
  assert.deepEqual(lines(result.stderr), [
    `usersctl: ${new URL(stub.url).host} did not send its whole answer within 0.5 s of its head`,
  ]);
});

test('a bare POST that timed out is not retried: it may have reached the server', async (t) => {
  const stub = await startStub(t, () => {});
  const result = await runAt(t, stub.url)(['--timeout', '0.2', '--retries', '3', 'login', '--password-stdin'], {
    stdin: 'pw',
  });
  assert.equal(result.code, EXIT.network);
  assert.equal(stub.requests.length, 1);
});

test('a PUT that timed out is retried: repeating it is harmless', async (t) => {
  const stub = await startStub(t, (_req, res, n) => (n === 0 ? undefined : sendJsonText(res, 200, USER)));
  const result = await runAt(t, stub.url)(['--timeout', '0.2', 'put', 'alice', '--name', 'Alice']);
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.equal(stub.requests.length, 2);
});

test('keep-alive connections are reused across a run: every response body is consumed', async (t) => {
  // Ten pages: a body left unread would pin its connection, forcing a new one per page.
  const page = (n: number) =>
    JSON.stringify({ items: [{ name: `U${n}`, id: n + 1 }], next: n < 9 ? `/users?after=${n + 1}&limit=1` : null });
  const stub = await startStub(t, (_req, res, n) => sendJsonText(res, 200, page(n)));
  const result = await runAt(t, stub.url)(['list', '--limit', '1']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(lines(result.stdout).length, 10);
  assert.equal(stub.requests.length, 10);
  // undici may open a second connection while the first is being released.
  assert.ok(stub.connections <= 2, `${stub.connections} connections for 10 requests`);
});

test('a failed answer without a problem document is reported by its status line', async (t) => {
  const stub = await startStub(t, (_req, res) => {
    res.writeHead(418, { 'content-type': 'text/plain' });
    res.end('short and stout');
  });
  const result = await runAt(t, stub.url)(['get', 'alice']);
  assert.equal(result.code, EXIT.conflict);
  assert.deepEqual(lines(result.stderr), [
    "usersctl: the server answered 418 I'm a Teapot; check that --url is the address of users-server",
  ]);
});

test('a 502 without a problem document (a proxy whose backend is down) is reported with what to check, after the retries, exit 6', async (t) => {
  const stub = await startStub(t, (_req, res) => {
    res.writeHead(502, { 'content-type': 'text/html' });
    res.end('<html><body>Bad Gateway</body></html>');
  });
  const result = await runAt(t, stub.url)(['--retries', '1', 'get', 'alice']);
  assert.equal(result.code, EXIT.server);
  assert.deepEqual(lines(result.stderr), [
    'usersctl: the server answered 502 Bad Gateway; try again later, or check what stands between usersctl and users-server (a proxy)',
  ]);
  assert.equal(stub.requests.length, 2, 'the GET was tried again once');
});

test('--url with a path prefix puts every request under it', async (t) => {
  const stub = await startStub(t, (_req, res) => sendJsonText(res, 200, USER));
  const result = await runAt(t, stub.url + '/api/')(['get', 'alice']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(stub.requests[0]!.url, '/api/users/alice');
});

const statusCases: Array<[number, number]> = [
  [400, EXIT.conflict],
  [401, EXIT.unauthorized],
  [403, EXIT.unauthorized],
  [404, EXIT.notFound],
  [405, EXIT.conflict],
  [409, EXIT.conflict],
  [410, EXIT.conflict],
  [412, EXIT.conflict],
  [413, EXIT.conflict],
  [415, EXIT.conflict],
  [422, EXIT.conflict],
  [428, EXIT.conflict],
  [500, EXIT.server],
  [501, EXIT.server],
  [503, EXIT.server],
  [300, EXIT.unexpected],
];

for (const [status, code] of statusCases) {
  test(`an answer ${status} exits ${code} with the problem's detail as the one stderr line`, async (t) => {
    const stub = await startStub(t, (_req, res) => sendProblem(res, status, `detail of ${status}`));
    const result = await runAt(t, stub.url)(['--retries', '0', 'get', 'alice']);
    assert.deepEqual(result, {
      code,
      stdout: '',
      stderr: `usersctl: ${status === 404 ? 'alice: ' : ''}detail of ${status}\n`,
    });
  });
}

test('an answer larger than 256 MiB (something that is not users-server at --url) is refused before it fills the memory: one sentence, exit 1, whether it declares its length or streams without end', async (t) => {
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  const stub = await startStub(t, (req, res) => {
    if (req.url === '/users/1') {
      // Declared: refused from the header, before the body is read.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(300 * chunk.length) });
      res.write(chunk);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    let sent = 0;
    const pump = () => {
      while (!res.destroyed && sent < 300) {
        sent++;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  const message = `usersctl: the answer of ${stub.url} is larger than 256 MiB, more than usersctl reads; check that --url is the address of users-server, or list fewer users a page (--limit)\n`;
  for (const ref of ['1', '2']) {
    const run = await usersctl(['--url', stub.url, 'get', ref]);
    assert.deepEqual([run.code, run.stdout, run.stderr], [1, '', message], ref);
  }
});

test('a web page answered 200 at --url (another server there) is never printed as a user: every command says so in one sentence and exits 1; import stops, its results still NDJSON', async (t) => {
  const PAGE = '<!DOCTYPE html><html><body>Welcome</body></html>';
  const stub = await startStub(t, (req, res) => {
    res.writeHead(req.method === 'POST' ? 201 : 200, {
      'content-type': 'text/html',
      'content-length': Buffer.byteLength(PAGE),
    });
    res.end(PAGE);
  });
  const run = runAt(t, stub.url);
  const commands: Array<[string[], string]> = [
    [['get', '1'], 'a user that is not JSON'],
    [['put', '1', '--name', 'A'], 'a user that is not JSON'],
    [['create', '--name', 'A'], 'a user that is not JSON'],
    [['new', '--name', 'A'], 'a user that is not JSON'],
    [['delete', '1'], 'a user that is not JSON'],
    [['mv', '1', '2'], 'a user that is not JSON'],
    [['reserve'], 'a reservation that is not JSON'],
    [['list'], 'a page of users that is not JSON'],
    [['tokens', 'list'], 'a list of API tokens that is not JSON'],
    [['tokens', 'create', 'ci'], 'a new API token that is not JSON'],
    [['status'], 'GET / answered 200 without the JSON string "OK"'],
    [['watch', '--no-follow'], 'a feed of changes that ends within a line'],
  ];
  for (const [args, what] of commands) {
    const result = await run(['--retries', '0', ...args]);
    const sentence = `usersctl: unexpected answer from the server: ${what}; check that --url is the address of users-server`;
    assert.deepEqual(
      [result.code, result.stdout, lines(result.stderr)],
      [EXIT.unexpected, '', [sentence]],
      args.join(' '),
    );
  }
  const imported = await run(['import'], { stdin: '{"name":"A","id":1}\n{"name":"B","id":2}\n{"name":"C","id":3}\n' });
  assert.equal(imported.code, EXIT.unexpected, imported.stderr);
  for (const line of lines(imported.stdout)) assert.equal((JSON.parse(line) as { ok: boolean }).ok, false, line);
  assert.match(
    imported.stderr,
    /^usersctl: unexpected answer from the server: a user that is not JSON; check that --url is the address of users-server; import stopped after line \d\n$/,
  );
});

test('watch prints the changes of a feed up to a line that is not a change, then stops with one sentence, exit 1', async (t) => {
  const feed =
    '{"cursor":"6","op":"put","id":1,"user":{"name":"A","id":1}}\n[1,2]\n{"cursor":"7","op":"delete","id":1}\n';
  const stub = await startStub(t, (_req, res) => {
    res.writeHead(200, {
      'content-type': 'application/x-ndjson',
      'x-changes-cursor': '5',
      'content-length': Buffer.byteLength(feed),
    });
    res.end(feed);
  });
  const result = await runAt(t, stub.url)(['watch', '--no-follow']);
  assert.deepEqual(
    [result.code, lines(result.stdout), lines(result.stderr)],
    [
      EXIT.unexpected,
      ['{"cursor":"6","op":"put","id":1,"user":{"name":"A","id":1}}'],
      [
        'usersctl: unexpected answer from the server: a change that is not a JSON object; check that --url is the address of users-server',
      ],
    ],
  );
});

test('watch --no-follow gives up on an unreachable server after --retries, like every other command: exit 7', async (t) => {
  const result = await runAt(t, await closedPortUrl())(['--retries', '1', 'watch', '--no-follow']);
  assert.equal(result.code, EXIT.network);
  const said = lines(result.stderr);
  assert.equal(said.length, 2, result.stderr);
  assert.match(
    said[0]!,
    /^usersctl: cannot connect to http:\/\/127\.0\.0\.1:\d+: connection refused; connecting again in \d\.\d s$/,
  );
  assert.match(said[1]!, /^usersctl: cannot connect to http:\/\/127\.0\.0\.1:\d+: connection refused$/);
});

test('watch waits out a server that answers "not now" (503 while its database is away, a proxy\'s 502), however many times and with --retries 0, and follows on from the last cursor; a refusal (401) ends it with the cursor', async (t) => {
  const change = '{"cursor":"6","op":"put","id":1,"user":{"name":"A","id":1}}\n';
  const stub = await startStub(t, (_req, res, n) => {
    if (n === 0)
      return sendProblem(res, 503, 'The database did not answer (ECONNREFUSED); retry shortly.', {
        'retry-after': '0',
      });
    if (n === 1) return sendProblem(res, 502, 'Bad gateway.');
    if (n === 2) {
      res.writeHead(200, {
        'content-type': 'application/x-ndjson',
        'x-changes-cursor': '5',
        'content-length': Buffer.byteLength(change),
      });
      return res.end(change);
    }
    if (n === 3)
      return sendProblem(res, 503, 'The database did not answer (ECONNREFUSED); retry shortly.', {
        'retry-after': '0',
      });
    sendProblem(res, 401, 'Log in first.');
  });
  const result = await runAt(t, stub.url)(['--retries', '0', 'watch', '--since', '5']);
  assert.equal(result.code, EXIT.unauthorized, result.stderr);
  assert.equal(result.stdout, change);
  const said = lines(result.stderr);
  assert.equal(said.length, 4, result.stderr);
  assert.match(
    said[0]!,
    /^usersctl: the server answered 503: The database did not answer \(ECONNREFUSED\); retry shortly; connecting again in \d\.\d s from cursor 5$/,
  );
  assert.match(
    said[1]!,
    /^usersctl: the server answered 502: Bad gateway; connecting again in \d\.\d s from cursor 5$/,
  );
  assert.match(said[2]!, /^usersctl: the server answered 503: .*; connecting again in \d\.\d s from cursor 6$/);
  assert.equal(said[3], 'usersctl: Log in first. The last cursor is 6: resume with usersctl watch --since 6');
  assert.deepEqual(
    stub.requests.map((r) => r.url),
    [
      '/changes?follow=1&since=5',
      '/changes?follow=1&since=5',
      '/changes?follow=1&since=5',
      '/changes?follow=1&since=6',
      '/changes?follow=1&since=6',
    ],
  );
});

test('watch --no-follow tries a server that answers 503 again --retries times, like every other command, then exits 6 with its sentence', async (t) => {
  const stub = await startStub(t, (_req, res) =>
    sendProblem(res, 503, 'The database did not answer (ECONNREFUSED); retry shortly.', { 'retry-after': '0' }),
  );
  const result = await runAt(t, stub.url)(['--retries', '2', 'watch', '--no-follow']);
  assert.equal(result.code, EXIT.server);
  assert.equal(stub.requests.length, 3);
  const said = lines(result.stderr);
  assert.equal(said.length, 3, result.stderr);
  assert.equal(said[2], 'usersctl: The database did not answer (ECONNREFUSED); retry shortly.');
});

test('list and export that fail after printing part of the users (a database out of reach at page 2) say that what they printed is incomplete, with the exit code of the failure; a table printed nothing and says nothing more', async (t) => {
  const page = JSON.stringify({
    items: [
      { name: 'A', id: 1 },
      { name: 'B', id: 2 },
    ],
    next: '/users?after=2&limit=2',
  });
  const stub = await startStub(t, (req, res) =>
    req.url!.includes('after=2')
      ? sendProblem(res, 503, 'The database did not answer (ECONNREFUSED); retry shortly.')
      : sendJsonText(res, 200, page),
  );
  const run = runAt(t, stub.url);
  const listed = await run(['--retries', '0', 'list', '-o', 'ndjson']);
  assert.deepEqual(
    [listed.code, lines(listed.stdout).length, lines(listed.stderr)],
    [
      EXIT.server,
      2,
      [
        'usersctl: The database did not answer (ECONNREFUSED); retry shortly; list stopped after 2 users: what was printed is incomplete, run it again',
      ],
    ],
  );
  const exported = await run(['--retries', '0', 'export']);
  assert.deepEqual(
    [exported.code, lines(exported.stdout).length, lines(exported.stderr)],
    [
      EXIT.server,
      3,
      [
        'usersctl: The database did not answer (ECONNREFUSED); retry shortly; export stopped after 2 users: what was written is incomplete, run it again',
      ],
    ],
  );
  const table = await run(['--retries', '0', 'list', '-o', 'table']);
  assert.deepEqual(
    [table.code, table.stdout, lines(table.stderr)],
    [EXIT.server, '', ['usersctl: The database did not answer (ECONNREFUSED); retry shortly.']],
  );
});

test('a connection closed with nothing read says "use https://" only while the server has answered nothing in the run: after an answer it is plainly HTTP', async (t) => {
  const stub = await startStub(t, (req, res, n) => (n === 0 ? sendJsonText(res, 200, USER) : req.socket.destroy()));
  const result = await runAt(t, stub.url)(['--retries', '0', 'get', '1', '2']);
  assert.equal(result.code, EXIT.network);
  assert.equal(result.stdout, USER + '\n');
  assert.match(
    result.stderr,
    /^usersctl: the connection to 127\.0\.0\.1:\d+ was closed before the answer was complete\n$/,
  );
});

test('list and export stop at a "next" link back to a page already read, which would be followed without end: one sentence, exit 1', async (t) => {
  const page = JSON.stringify({ items: [{ name: 'A', id: 1 }], next: '/users?after=0&limit=1' });
  const stub = await startStub(t, (_req, res) => sendJsonText(res, 200, page));
  const sentence =
    'usersctl: unexpected answer from the server: a "next" link back to a page already read (/users?after=0&limit=1); check that --url is the address of users-server';
  for (const command of ['list', 'export']) {
    const result = await runAt(t, stub.url)([command]);
    assert.deepEqual([result.code, lines(result.stderr)], [EXIT.unexpected, [sentence]], command);
    assert.equal(lines(result.stdout).filter((line) => line.includes('"A"')).length, 2, command);
  }
  assert.equal(stub.requests.length, 4);
});

test('watch refuses a line of the feed that never ends (past 256 MiB) instead of holding it all: one sentence, exit 1', async (t) => {
  const chunk = 'a'.repeat(1024 * 1024);
  const stub = await startStub(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'x-changes-cursor': '5' });
    res.write('{"cursor":"6","op":"delete","id":1}\n');
    const pump = () => {
      while (!res.destroyed) if (!res.write(chunk)) return void res.once('drain', pump);
    };
    pump();
  });
  const result = await runAt(t, stub.url)(['watch', '--no-follow']);
  assert.deepEqual(
    [result.code, result.stdout, lines(result.stderr)],
    [
      EXIT.unexpected,
      '{"cursor":"6","op":"delete","id":1}\n',
      [
        'usersctl: unexpected answer from the server: a change longer than 256 MiB; check that --url is the address of users-server',
      ],
    ],
  );
});

test('a server at --url that does not speak HTTP/1.1 (an SSH banner, a bare body), or sends more header fields than usersctl reads, is one sentence, exit 1, not retried', async (t) => {
  const answers: Record<string, string> = {
    'not HTTP/1.1': 'SSH-2.0-OpenSSH_9.2\r\n',
    'header fields larger than usersctl reads (16 KiB)': `HTTP/1.1 200 OK\r\n${Array.from({ length: 300 }, (_, i) => `Set-Cookie: c${i}=${'v'.repeat(100)}\r\n`).join('')}Content-Length: 2\r\n\r\n{}`,
  };
  for (const [what, answer] of Object.entries(answers)) {
    let connections = 0;
    const server = createNetServer((socket) => {
      connections++;
      socket.once('data', () => socket.end(answer));
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const result = await runAt(
      t,
      `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    )(['--retries', '2', 'get', '1']);
    assert.deepEqual(
      [result.code, result.stdout, lines(result.stderr)],
      [
        EXIT.unexpected,
        '',
        [`usersctl: unexpected answer from the server: ${what}; check that --url is the address of users-server`],
      ],
      what,
    );
    assert.equal(connections, 1, what);
  }
});

test('a redirect to another origin (http to https at a proxy) is not followed, and the sentence names the --url to give instead, exit 1', async (t) => {
  const stub = await startStub(t, (req, res) => {
    res.writeHead(301, { location: `https://users.example.com:8443${req.url}`, 'content-length': '0' });
    res.end();
  });
  const plain = await runAt(t, stub.url)(['get', '1']);
  assert.deepEqual(
    [plain.code, lines(plain.stderr)],
    [
      EXIT.unexpected,
      [
        `usersctl: ${stub.url}/users/1 redirects to https://users.example.com:8443/users/1 (301), another origin, which usersctl does not follow: if users-server is there, give --url https://users.example.com:8443`,
      ],
    ],
  );
  const prefixed = await runAt(t, `${stub.url}/api`)(['status']);
  assert.deepEqual(
    [prefixed.code, lines(prefixed.stderr)],
    [
      EXIT.unexpected,
      [
        `usersctl: ${stub.url}/api/ redirects to https://users.example.com:8443/api/ (301), another origin, which usersctl does not follow: if users-server is there, give --url https://users.example.com:8443/api`,
      ],
    ],
  );
  assert.equal(stub.requests.length, 2, 'nothing was sent to the other origin, nor retried');
});

test("a server's text printed on stderr cannot drive the terminal: control characters in a problem's detail are shown as \\xNN, on one line", async (t) => {
  const stub = await startStub(t, (_req, res) =>
    sendProblem(res, 409, 'taken\u001b]0;owned\u0007 by\r\nsomeone\u001b[2J'),
  );
  const result = await runAt(t, stub.url)(['--retries', '0', 'put', 'alice', '--name', 'A']);
  assert.deepEqual(
    [result.code, result.stderr],
    [EXIT.conflict, 'usersctl: taken\\x1b]0;owned\\x07 by someone\\x1b[2J\n'],
  );
});
