import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { join } from 'node:path';
import { test } from 'node:test';
import { DEFAULT_IMPORT_NAMESPACE } from '../cli/import.js';
import { EXIT } from '../cli/main.js';
import { MAX_INPUT_BYTES, readLines } from '../cli/streams.js';
import { NAMESPACE_URL, uuidV5 } from '../cli/uuid.js';
import { listText, put, send, tempDir } from './helpers.js';
import { lines, sendJsonText, startCliServer, startStub, usersctl } from './cli-helpers.js';

// usersctl import: NDJSON in, one result per line out, in input order.

type Result = {
  line: number;
  ok: boolean;
  action?: string;
  status?: number;
  error?: string;
  user?: Record<string, unknown>;
};

function results(stdout: string): Result[] {
  return lines(stdout).map((l) => JSON.parse(l) as Result);
}

function userCount(list: string): number {
  return (JSON.parse(list) as { items: unknown[] }).items.length;
}

test("UUIDv5 matches the RFC 9562 test vector and Python's uuid.uuid5", () => {
  // RFC 9562 appendix A.4: DNS namespace, "www.example.com".
  assert.equal(
    uuidV5('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'www.example.com'),
    '2ed6657d-e927-568b-95e1-2665a8aea6a2',
  );
  // The documented default namespace is UUIDv5(URL, "tag:users-server,2026:usersctl/import").
  assert.equal(uuidV5(NAMESPACE_URL, 'tag:users-server,2026:usersctl/import'), DEFAULT_IMPORT_NAMESPACE);
});

test('import prints one result per non-blank line, in input order, and exits 0 when all succeed', async (t) => {
  const cli = await startCliServer(t);
  const input = '{"name":"A"}\n\n{"name":"B","email":"b@example.com"}\n   \n{"name":"C"}';
  const result = await cli.run(['import'], { stdin: input });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.equal(result.stderr, '');
  const out = results(result.stdout);
  assert.deepEqual(
    out.map((r) => [r.line, r.ok, r.user?.name]),
    [
      [1, true, 'A'],
      [3, true, 'B'],
      [5, true, 'C'],
    ],
  );
  // Lines are sent concurrently: which gets which id is the order their writes commit in.
  assert.deepEqual({ ...out[1]!.user, id: 0 }, { name: 'B', email: 'b@example.com', id: 0 });
  assert.deepEqual(out.map((r) => r.user?.id).sort(), [1, 2, 3]);
  assert.equal(userCount(await listText(cli.server)), 3);
});

test('a failed line gets {"line","ok":false,"status","error"}; the others still import, and the exit code is 8', async (t) => {
  const cli = await startCliServer(t);
  const input = ['{"name":"A"}', '{"name":', '{"name":""}', '[1,2]', '{"name":"E"}'].join('\n') + '\n';
  const result = await cli.run(['import'], { stdin: input });
  assert.equal(result.code, EXIT.partialImport);
  const out = results(result.stdout);
  assert.deepEqual(
    out.map((r) => [r.line, r.ok, r.status]),
    [
      [1, true, undefined],
      [2, false, 0],
      [3, false, 422],
      [4, false, 0],
      [5, true, undefined],
    ],
  );
  assert.match(out[1]!.error!, /^invalid JSON/);
  assert.equal(out[2]!.error, 'name must have 1 to 200 characters (field "name").');
  assert.equal(out[3]!.error, 'a line must be a JSON object');
  // Not a terminal: no summary, just the one failure line.
  assert.deepEqual(lines(result.stderr), ['usersctl: 3 of 5 lines failed; their results on stdout say why']);
});

test('a re-run of the same file creates no duplicates: each line has a UUIDv5 alias of its bytes', async (t) => {
  const cli = await startCliServer(t);
  const file = join(tempDir(t, 'usersctl-files-'), 'users.ndjson');
  writeFileSync(file, '{"name":"A"}\r\n{"name":"B"}\r\n');
  const first = await cli.run(['import', '-f', file]);
  assert.equal(first.code, EXIT.ok, first.stderr);
  const before = await listText(cli.server);
  const second = await cli.run(['import', '-f', file]);
  assert.equal(second.code, EXIT.ok);
  assert.equal(await listText(cli.server), before);
  assert.deepEqual(
    results(second.stdout).map((r) => r.user),
    results(first.stdout).map((r) => r.user),
  );
  // The alias is UUIDv5(default namespace, line bytes without CRLF).
  const alias = uuidV5(DEFAULT_IMPORT_NAMESPACE, '{"name":"A"}');
  assert.equal(JSON.parse((await send(cli.server.url, 'GET', `/users/${alias}`)).text).name, 'A');
});

test('import takes its file as an argument as -f does; two different files named is a usage error, and nothing is imported', async (t) => {
  const cli = await startCliServer(t);
  const dir = tempDir(t, 'usersctl-files-');
  const [first, other] = [join(dir, 'users.ndjson'), join(dir, 'other.ndjson')];
  writeFileSync(first, '{"name":"A"}\n');
  writeFileSync(other, '{"name":"B"}\n');
  const empty = await listText(cli.server);
  const both = await cli.run(['import', first, '-f', other]);
  assert.equal(both.code, EXIT.usage, both.stderr);
  assert.match(both.stderr, /two inputs given .*name the file once/);
  assert.equal(await listText(cli.server), empty, 'a refused import changed nothing');
  const byArgument = await cli.run(['import', first]);
  assert.equal(byArgument.code, EXIT.ok, byArgument.stderr);
  const again = await cli.run(['import', first, '-f', first]);
  assert.equal(again.code, EXIT.ok, again.stderr);
  assert.deepEqual(
    results(again.stdout).map((r) => r.user),
    results(byArgument.stdout).map((r) => r.user),
    'the same file named twice is one input',
  );
});

test('--uuid-namespace derives the aliases under that namespace', async (t) => {
  const cli = await startCliServer(t);
  const ns = '0f1e2d3c-4b5a-4978-8877-665544332211';
  assert.equal((await cli.run(['import', '--uuid-namespace', ns], { stdin: '{"name":"A"}\n' })).code, EXIT.ok);
  assert.equal((await send(cli.server.url, 'GET', `/users/${uuidV5(ns, '{"name":"A"}')}`)).status, 200);
  assert.equal(
    (await send(cli.server.url, 'GET', `/users/${uuidV5(DEFAULT_IMPORT_NAMESPACE, '{"name":"A"}')}`)).status,
    404,
  );
});

test("--alias-field PUTs each line under its field's value: a changed line replaces instead of duplicating", async (t) => {
  const cli = await startCliServer(t);
  // One line at a time: ann gets id 1 whatever the store (PostgreSQL may order concurrent creates otherwise).
  const first = await cli.run(['import', '--alias-field', 'login', '--concurrency', '1'], {
    stdin: '{"login":"ann","name":"Ann"}\n{"login":"bo","name":"Bo"}\n',
  });
  assert.equal(first.code, EXIT.ok);
  assert.deepEqual(
    results(first.stdout).map((r) => r.action),
    ['created', 'created'],
  );
  const again = await cli.run(['import', '--alias-field', 'login'], { stdin: '{"login":"ann","name":"Ann Smith"}\n' });
  assert.equal(again.code, EXIT.ok);
  assert.equal(
    lines(again.stdout)[0],
    '{"line":1,"ok":true,"action":"replaced","user":{"login":"ann","name":"Ann Smith","id":1}}',
  );
  assert.equal(userCount(await listText(cli.server)), 2);
  const missing = await cli.run(['import', '--alias-field', 'login'], {
    stdin: '{"name":"No login"}\n{"login":"a b","name":"Bad"}\n',
  });
  assert.equal(missing.code, EXIT.partialImport);
  assert.deepEqual(
    results(missing.stdout).map((r) => [r.status, r.error?.startsWith('field "login" must be an alias')]),
    [
      [0, true],
      [0, true],
    ],
  );
});

test('a line with a numeric id is PUT to /users/<id>', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  const result = await cli.run(['import'], {
    stdin: '{"id":1,"name":"Alice Replaced"}\n{"id":77,"name":"Never issued"}\n',
  });
  assert.equal(result.code, EXIT.partialImport);
  const out = results(result.stdout);
  assert.deepEqual(out[0]!.user, { id: 1, name: 'Alice Replaced' });
  assert.equal(out[1]!.status, 404);
  assert.equal(userCount(await listText(cli.server)), 1);
});

test('export then import into another server reproduces the users, aliases and all', async (t) => {
  const from = await startCliServer(t);
  for (const name of ['A', 'B', 'C'])
    await put(from.server.url, `/users/${name.toLowerCase()}`, { name, extra: { n: name } });
  const exported = await from.run(['export']);
  const to = await startCliServer(t);
  // One record at a time: the new ids then follow the records, whatever the store.
  const result = await to.run(['import', '--concurrency', '1'], { stdin: exported.stdout });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.equal((await to.run(['export'])).stdout, exported.stdout);
});

test('results stay in input order when answers arrive out of order, and at most --concurrency requests are in flight', async (t) => {
  let inFlight = 0;
  let most = 0;
  const stub = await startStub(t, (_req, res, _n, body) => {
    inFlight++;
    most = Math.max(most, inFlight);
    const n = (JSON.parse(body) as { n: number }).n;
    // Later lines answer sooner: each waits turns of the event loop, fewer the later it is.
    let turns = (40 - n) * 4;
    const answer = () => {
      if (turns-- > 0) return void setImmediate(answer);
      inFlight--;
      sendJsonText(res, 201, JSON.stringify({ ...(JSON.parse(body) as object), id: n + 1 }));
    };
    answer();
  });
  const home = tempDir(t, 'usersctl-home-');
  const input = Array.from({ length: 40 }, (_, n) => JSON.stringify({ name: `U${n}`, n })).join('\n');
  const result = await usersctl(['--url', stub.url, 'import', '--concurrency', '4'], {
    stdin: input,
    env: { HOME: home, XDG_STATE_HOME: home },
  });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.deepEqual(
    results(result.stdout).map((r) => r.line),
    Array.from({ length: 40 }, (_, n) => n + 1),
  );
  assert.deepEqual(
    results(result.stdout).map((r) => r.user?.n),
    Array.from({ length: 40 }, (_, n) => n),
  );
  assert.ok(most <= 4 && most >= 2, `${most} requests in flight`);
});

test('on a terminal, import shows progress and a summary on stderr; stdout is unchanged', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['import'], { stdin: '{"name":"A"}\n{"name":""}\n', stderrTTY: true });
  assert.equal(result.code, EXIT.partialImport);
  assert.equal(lines(result.stdout).length, 2);
  assert.match(result.stderr, /usersctl: 2 lines in \d+\.\d s: 1 ok \(1 created, 0 replaced\), .*1 failed/);
  const quiet = await cli.run(['-q', 'import'], { stdin: '{"name":"A"}\n', stderrTTY: true });
  assert.equal(quiet.stderr, '');
});

test('import stops with exit 7 when the server cannot be reached', async (t) => {
  const stub = await startStub(t, (req) => req.socket.destroy());
  const home = tempDir(t, 'usersctl-home-');
  const input = Array.from({ length: 50 }, (_, n) => JSON.stringify({ name: `U${n}` })).join('\n');
  const result = await usersctl(['--url', stub.url, '--retries', '0', 'import', '--concurrency', '2'], {
    stdin: input,
    env: { HOME: home, XDG_STATE_HOME: home },
  });
  assert.equal(result.code, EXIT.network);
  assert.match(
    result.stderr,
    /^usersctl: the connection to .* was closed before the answer was complete; nothing came back: if the server speaks HTTPS there, use https:\/\/ in --url; import stopped after line \d+\n$/,
  );
  const out = results(result.stdout);
  assert.ok(out.length >= 1 && out.length < 50);
  assert.ok(out.every((r) => !r.ok && r.status === 0));
});

test('import usage errors exit 2: a missing file, a bad namespace, two alias sources', async (t) => {
  const cli = await startCliServer(t);
  const missing = await cli.run(['import', '-f', join(tempDir(t), 'nope.ndjson')]);
  assert.equal(missing.code, EXIT.usage);
  assert.match(missing.stderr, /does not exist; check the path/);
  assert.equal((await cli.run(['import', '--uuid-namespace', 'not-a-uuid'])).code, EXIT.usage);
  assert.equal(
    (await cli.run(['import', '--alias-field', 'a', '--uuid-namespace', DEFAULT_IMPORT_NAMESPACE])).code,
    EXIT.usage,
  );
  assert.equal((await cli.run(['import', '--concurrency', '0'])).code, EXIT.usage);
});

test('readLines gives the same lines and byte offsets however the input is cut into chunks: CRLF across a cut, a line over many chunks, a BOM, no final newline', async () => {
  const long = 'x'.repeat(20_000);
  const text = `\ufeff{"a":1}\r\n\n${long}\r\nmiddle\n\r\n{"tail":true}`;
  const input = Buffer.from(text, 'utf8');
  // The lines by one split of the whole input, the BOM and each line's CR dropped.
  const expected: { number: number; text: string; end: number }[] = [];
  let offset = 3;
  input
    .subarray(3)
    .toString('latin1')
    .split('\n')
    .forEach((line, i, all) => {
      offset += Buffer.byteLength(line, 'latin1') + (i < all.length - 1 ? 1 : 0);
      if (i < all.length - 1 || line !== '')
        expected.push({ number: i + 1, text: line.replace(/\r$/, ''), end: offset });
    });
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (const size of [1, 2, 3, 7, 4096, 8192, input.length, 0]) {
    const chunks: Buffer[] = [];
    // size 0: cuts at random places, CRs and LFs among them.
    for (let at = 0; at < input.length;) {
      const next = Math.min(input.length, at + (size === 0 ? 1 + Math.floor(random() * 20_000) : size));
      chunks.push(input.subarray(at, next));
      at = next;
    }
    const got: { number: number; text: string; end: number }[] = [];
    for await (const line of readLines(
      (async function* () {
        yield* chunks;
      })(),
    ))
      got.push({ number: line.number, text: line.bytes.toString('latin1'), end: line.end });
    // Long texts by their length: a failure stays readable.
    const brief = (lines: typeof got) =>
      lines.map((l) => ({ ...l, text: l.text.length > 40 ? `${l.text.length} bytes` : l.text }));
    assert.deepEqual(brief(got), brief(expected), `chunks of ${size || 'random sizes'}`);
  }
});

/**
 * `before`, then `size` bytes of "x" in 1 MiB chunks (one buffer, never copied here), then `after`: input of any
 * length, made as it is read.
 */
async function* longInput(before: string, size: number, after: string): AsyncGenerator<Buffer> {
  const chunk = Buffer.alloc(1024 * 1024, 'x');
  yield Buffer.from(before);
  for (let left = size; left > 0; left -= chunk.length) yield left >= chunk.length ? chunk : chunk.subarray(0, left);
  yield Buffer.from(after);
}

test('readLines: a line longer than 64 MiB is not kept but given as too long with its length, in its place, and the lines around it are whole', async () => {
  const size = MAX_INPUT_BYTES + 5;
  const got = [];
  for await (const line of readLines(longInput('{"a":1}\n', size, '\n{"b":2}\n')))
    got.push([line.number, line.bytes.toString(), line.tooLong, line.end]);
  const first = '{"a":1}\n'.length;
  assert.deepEqual(got, [
    [1, '{"a":1}', undefined, first],
    [2, '', size, first + size + 1],
    [3, '{"b":2}', undefined, first + size + 1 + '{"b":2}\n'.length],
  ]);
  const last = [];
  for await (const line of readLines(longInput('', size, ''))) last.push([line.number, line.tooLong, line.end]);
  assert.deepEqual(last, [[1, size, size]], 'without a final newline');
});

test('usersctl import: a line longer than the 64 MiB users-server takes is a failed result, not sent, and the lines after it are imported (exit 8); put -f and login --password-stdin refuse such input at once, exit 2, even when it never ends', async (t) => {
  const { run } = await startCliServer(t);
  const imported = await run(['import'], {
    stdin: Readable.from(longInput('', MAX_INPUT_BYTES + 1, '\n{"name":"After"}\n')),
  });
  assert.equal(imported.code, EXIT.partialImport, imported.stderr);
  const results = lines(imported.stdout).map((l) => JSON.parse(l));
  assert.deepEqual(results[0], {
    line: 1,
    ok: false,
    status: 0,
    error: `the line is ${MAX_INPUT_BYTES + 1} bytes long, more than the 64 MiB users-server takes in a body; it was not sent`,
  });
  assert.equal(results[1].user.name, 'After');
  const endless = () =>
    Readable.from(
      (async function* () {
        const chunk = Buffer.alloc(1024 * 1024);
        for (;;) yield chunk;
      })(),
    );
  const put = await run(['put', 'ann', '-f', '-'], { stdin: endless() });
  assert.deepEqual(
    [put.code, put.stderr],
    [EXIT.usage, 'usersctl: stdin is longer than 64 MiB, more than users-server takes in a body\n'],
  );
  const login = await run(['login', '--password-stdin'], { stdin: endless() });
  assert.deepEqual(
    [login.code, login.stderr],
    [EXIT.usage, 'usersctl: the password on stdin is longer than 64 MiB, more than users-server takes in a body\n'],
  );
});
