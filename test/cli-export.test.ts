/**
 * `usersctl export` and `import` of an export (docs/cli.md "Export and
 * import"): every user with its id and alias; rebuilt under new ids (the
 * default, results mapping oldId to id) or the same ids (--keep-ids); a user
 * that exists with other content is never overwritten silently.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { lines, shellWithUsersctl, startCliServer, startStub, usersctl } from './cli-helpers.js';
import { listText, put, send, startTestServer, tempDir, type TestServer } from './helpers.js';
import { CLI_BIN, runTool } from './processes.js';

const HEADER = '{"usersctl":"export","version":2}';
/** The header of an export made before exports had an end record. */
const OLD_HEADER = '{"usersctl":"export","version":1}';

function results(stdout: string): Record<string, unknown>[] {
  return lines(stdout).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Users under aliases and without, a deleted one, a skipped reserved id, non-ASCII and nested fields. */
async function populate(server: TestServer): Promise<void> {
  const url = server.url;
  assert.equal((await put(url, '/users/alice', { name: 'Alice', tags: ['a', { deep: [1, 2.5, null] }] })).status, 201);
  assert.equal((await put(url, '/users/bob', { name: 'Bob' })).status, 201);
  assert.equal((await send(url, 'POST', '/users/new', { json: { name: 'Plain', city: 'Zürich "Z"' } })).status, 201);
  assert.equal((await send(url, 'DELETE', '/users/bob')).status, 204);
  assert.equal((await send(url, 'POST', '/reservations')).status, 201);
  assert.equal((await put(url, '/users/dave', { name: 'Dave', '10': 'digits first' })).status, 201);
  assert.equal((await send(url, 'POST', '/users/new', { json: { name: 'Last' } })).status, 201);
}

test('node bin/usersctl.js: export from A, import --keep-ids into an empty B, export from B: byte-identical (ids with gaps, aliases, unaliased users); a second import changes nothing', async (t) => {
  if ((await runTool(t, 'sh', ['-c', 'command -v bash']).catch(() => undefined))?.code !== 0)
    return t.skip('bash not found');
  const a = await startTestServer(t);
  const b = await startTestServer(t);
  await populate(a);
  const { home, env } = shellWithUsersctl(t, a.url);
  const script = [
    'set -euo pipefail',
    'usersctl export > a.ndjson',
    `usersctl --url ${b.url} import --keep-ids -f a.ndjson > results.ndjson`,
    `usersctl --url ${b.url} export > b.ndjson`,
    'cmp a.ndjson b.ndjson',
    `usersctl --url ${b.url} import --keep-ids -f a.ndjson > again.ndjson`,
  ].join('\n');
  const run = await runTool(t, 'bash', ['-c', `cd "$HOME" && ${script}`], { env });
  assert.equal(run.code, 0, run.stderr);
  const exported = readFileSync(join(home, 'a.ndjson'), 'utf8');
  assert.equal(lines(exported)[0], HEADER);
  assert.deepEqual(
    lines(exported)
      .slice(1, -1)
      .map((l) => [JSON.parse(l).id, JSON.parse(l).alias]),
    [
      [1, 'alice'],
      [3, null],
      [5, 'dave'],
      [6, null],
    ],
  );
  assert.equal(lines(exported).at(-1), '{"usersctl":"end","users":4}');
  assert.deepEqual(
    results(readFileSync(join(home, 'results.ndjson'), 'utf8')).map((r) => [r.oldId, r.id, r.action]),
    [
      [1, 1, 'created'],
      [3, 3, 'created'],
      [5, 5, 'created'],
      [6, 6, 'created'],
    ],
  );
  assert.deepEqual(
    results(readFileSync(join(home, 'again.ndjson'), 'utf8')).map((r) => r.action),
    ['unchanged', 'unchanged', 'unchanged', 'unchanged'],
  );
  assert.equal(await listText(b), await listText(a));
  assert.equal(
    (await send(b.url, 'GET', '/users/dave')).headers['content-location'],
    '/users/5',
    'the alias is bound to the same id',
  );
});

test('import of an export into a server with users of its own: new ids, results map oldId to id, and the unrelated user 1 is untouched', async (t) => {
  const a = await startCliServer(t);
  await populate(a.server);
  const exported = (await a.run(['export'])).stdout;
  const b = await startCliServer(t);
  assert.equal((await put(b.server.url, '/users/zed', { name: 'Unrelated' })).status, 201);
  const imported = await b.run(['import'], { stdin: exported });
  assert.equal(imported.code, EXIT.ok, imported.stderr);
  const map = results(imported.stdout);
  assert.deepEqual(
    map.map((r) => [r.oldId, r.action]),
    [
      [1, 'created'],
      [3, 'created'],
      [5, 'created'],
      [6, 'created'],
    ],
  );
  // A record without an alias gets its line's (UUIDv5), under which a re-run finds it.
  assert.deepEqual(
    map.map((r) => (typeof r.alias === 'string' && /^[0-9a-f-]{36}$/.test(r.alias) ? 'derived' : r.alias)),
    ['alice', 'derived', 'dave', 'derived'],
  );
  for (const r of map) assert.equal((await send(b.server.url, 'GET', `/users/${r.alias}`)).json().id, r.id);
  assert.deepEqual(map.map((r) => r.id).sort(), [2, 3, 4, 5], "new ids, after the target's own");
  // Each result's id is where that user now lives (the order of creation is the requests').
  const old = new Map(
    lines(exported)
      .slice(1, -1)
      .map((l) => [JSON.parse(l).id as number, JSON.parse(l).user as Record<string, unknown>]),
  );
  for (const r of map)
    assert.deepEqual(
      (await send(b.server.url, 'GET', `/users/${r.id}`)).json(),
      { ...old.get(r.oldId as number), id: r.id },
      `oldId ${r.oldId} -> id ${r.id}`,
    );
  assert.equal((await send(b.server.url, 'GET', '/users/1')).text, '{"name":"Unrelated","id":1}');
  assert.equal((await send(b.server.url, 'GET', '/users/alice')).json().name, 'Alice');
  // A re-run finds every user under its alias, unchanged.
  const again = await b.run(['import'], { stdin: exported });
  assert.deepEqual(
    results(again.stdout).map((r) => [r.id, r.action]),
    map.map((r) => [r.id, 'unchanged']),
  );
  assert.equal(JSON.parse(await listText(b.server)).items.length, 5, 'no duplicates');
});

test('a user that exists with other content is reported (412, exit 8) and left alone; --overwrite replaces it; ids gone or taken on the target are refused', async (t) => {
  const a = await startCliServer(t);
  await populate(a.server);
  const exported = (await a.run(['export'])).stdout;
  const b = await startCliServer(t);
  assert.equal((await b.run(['import', '--keep-ids'], { stdin: exported })).code, EXIT.ok);
  assert.equal((await put(b.server.url, '/users/alice', { name: 'Alice, changed on B' })).status, 200);
  const refused = await b.run(['import', '--keep-ids'], { stdin: exported });
  assert.equal(refused.code, EXIT.partialImport);
  const first = results(refused.stdout)[0]!;
  assert.deepEqual([first.ok, first.status], [false, 412]);
  assert.match(
    String(first.error),
    /^the alias alice exists on the target with other content; nothing was changed \(--overwrite replaces it\)$/,
  );
  assert.equal((await send(b.server.url, 'GET', '/users/alice')).json().name, 'Alice, changed on B');
  const overwritten = await b.run(['import', '--keep-ids', '--overwrite'], { stdin: exported });
  assert.equal(overwritten.code, EXIT.ok, overwritten.stdout);
  assert.deepEqual(
    results(overwritten.stdout).map((r) => r.action),
    ['replaced', 'unchanged', 'unchanged', 'unchanged'],
  );
  assert.equal(await listText(b.server), await listText(a.server));
  // What it overwrote is in its result, as B stored it: no original is lost.
  assert.equal(
    lines(overwritten.stdout)[0],
    `{"line":2,"oldId":1,"alias":"alice","ok":true,"action":"replaced","id":1,"previous":{"name":"Alice, changed on B","id":1}}`,
  );
  assert.ok(
    results(overwritten.stdout)
      .slice(1)
      .every((r) => !('previous' in r)),
    'only a replaced user carries previous',
  );

  // Another target: id 3 deleted there, id 5 held by another user.
  const c = await startCliServer(t);
  for (const name of ['c1', 'c2', 'c3', 'c4', 'c5']) await put(c.server.url, `/users/${name}`, { name });
  assert.equal((await send(c.server.url, 'DELETE', '/users/3')).status, 204);
  const clash = await c.run(['import', '--keep-ids'], { stdin: exported });
  assert.equal(clash.code, EXIT.partialImport);
  const byId = new Map(results(clash.stdout).map((r) => [r.oldId, r]));
  assert.match(String(byId.get(3)!.error), /^the id 3 was issued on the target and its user deleted/);
  assert.match(String(byId.get(5)!.error), /^the id 5 belongs to another user on the target$/);
  assert.equal((await send(c.server.url, 'GET', '/users/5')).json().name, 'c5', 'nothing was overwritten');
});

test('--overwrite replaces only over the version it read: If-Match carries the ETag of its GET, and a 412 (changed meanwhile) is reported, not retried blindly', async (t) => {
  const seen: string[] = [];
  const stub = await startStub(t, (req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers['if-match'] ?? ''}${req.headers['if-none-match'] ?? ''}`);
    const send = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, {
        'content-type': status >= 400 ? 'application/problem+json' : 'application/json',
        ...headers,
      });
      res.end(body);
    };
    if (req.method === 'PUT' && req.headers['if-none-match'] === '*')
      return send(412, '{"type":"about:blank","title":"Precondition failed","status":412,"detail":"exists"}');
    if (req.method === 'GET') return send(200, '{"name":"Other","id":1}', { etag: '"v1"' });
    return send(412, '{"type":"about:blank","title":"Precondition failed","status":412,"detail":"changed"}');
  });
  const input = `${HEADER}\n{"id":1,"alias":"alice","user":{"name":"Alice","id":1}}\n`;
  const result = await usersctl(['--url', stub.url, 'import', '--keep-ids', '--overwrite'], { stdin: input });
  assert.equal(result.code, EXIT.partialImport);
  assert.deepEqual(seen, ['PUT /users/alice *', 'GET /users/alice ', 'PUT /users/alice "v1"']);
  assert.match(
    String(results(result.stdout)[0]!.error),
    /^the alias alice changed on the target while it was being imported; nothing was overwritten$/,
  );
});

test('--keep-ids and --overwrite on plain user lines, or --alias-field on an export, are usage errors (exit 2) before anything is sent', async (t) => {
  const cli = await startCliServer(t);
  const plain = await cli.run(['import', '--keep-ids'], { stdin: '{"name":"X"}\n' });
  assert.equal(plain.code, EXIT.usage);
  assert.match(plain.stderr, /--keep-ids and --overwrite apply to an export/);
  const aliasField = await cli.run(['import', '--alias-field', 'login'], {
    stdin: `${HEADER}\n{"id":1,"alias":null,"user":{"name":"X","id":1}}\n`,
  });
  assert.equal(aliasField.code, EXIT.usage);
  assert.equal(JSON.parse(await listText(cli.server)).items.length, 0);
  const bad = await cli.run(['import'], { stdin: `${HEADER}\n{"id":1,"user":{"name":"X","id":2}}\n` });
  assert.equal(bad.code, EXIT.partialImport);
  assert.match(String(results(bad.stdout)[0]!.error), /alias/);
});

test("an export imported again a day later (the server's Idempotency-Key records gone) still adds no user: every user, aliased or not, is found under its alias", async (t) => {
  const a = await startCliServer(t);
  await populate(a.server);
  const exported = (await a.run(['export'])).stdout;
  let now = Date.now();
  const b = await startTestServer(t, {}, { clock: () => now });
  const env = { HOME: a.env.HOME, XDG_STATE_HOME: a.env.XDG_STATE_HOME, USERSCTL_URL: b.url };
  assert.equal((await usersctl(['import'], { stdin: exported, env })).code, EXIT.ok);
  const listing = await listText(b);
  now += 25 * 3600_000;
  await b.running.store.sweep(now);
  const again = await usersctl(['import'], { stdin: exported, env });
  assert.equal(again.code, EXIT.ok, again.stderr);
  assert.deepEqual(
    results(again.stdout).map((r) => r.action),
    ['unchanged', 'unchanged', 'unchanged', 'unchanged'],
  );
  assert.equal(await listText(b), listing);
});

test('import --keep-ids: a record whose id the target already issued (to another user, to one since deleted, to a live reservation) is refused and reserves no id, run after run', async (t) => {
  const a = await startTestServer(t);
  for (const alias of ['a1', 'a2', 'a3', 'a4'])
    assert.equal((await put(a.url, `/users/${alias}`, { name: alias })).status, 201);
  const b = await startTestServer(t);
  for (const alias of ['b1', 'b2']) assert.equal((await put(b.url, `/users/${alias}`, { name: alias })).status, 201);
  assert.equal((await send(b.url, 'DELETE', '/users/2')).status, 204);
  assert.equal((await send(b.url, 'POST', '/reservations')).json().id, 3);
  const env = { HOME: tempDir(t) };
  const file = join(env.HOME, 'a.ndjson');
  writeFileSync(file, (await usersctl(['--url', a.url, 'export'], { env })).stdout);
  const reservations = async () => (await b.running.store.stats(Date.now())).reservations;
  for (const run of ['first', 'second']) {
    const imported = await usersctl(['--url', b.url, 'import', '--keep-ids', file], { env });
    assert.equal(imported.code, EXIT.partialImport, `${run} run: ${imported.stderr}`);
    assert.deepEqual(
      results(imported.stdout).map((r) => [r.oldId, r.ok ? r.action : r.status]),
      [
        [1, 409],
        [2, 410],
        [3, 409],
        [4, run === 'first' ? 'created' : 'unchanged'],
      ],
      `${run} run`,
    );
    assert.equal(await reservations(), 1, `${run} run: the target's own reservation, and none of the import's`);
  }
  assert.equal((await send(b.url, 'GET', '/users/a4')).json().id, 4, 'the id that was free is kept');
});

test('node bin/usersctl.js: an export cut short (its server lost part way) has no end record; its import imports what it holds, says it was cut short after how many users, and exits 8; a whole export ends with its end record and imports with exit 0; an old export (version 1, no end record) still imports', async (t) => {
  const source = await startStub(t, (_req, res, n) => {
    if (n > 0) {
      res.writeHead(500, { 'content-type': 'application/problem+json' });
      return res.end('{"type":"about:blank","title":"Internal Server Error","status":500}');
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        items: [
          { name: 'Ann', id: 1 },
          { name: 'Bob', id: 2 },
        ],
        aliases: { '1': 'ann' },
        next: '/users?limit=1000&aliases=true&after=2',
      }),
    );
  });
  const target = await startTestServer(t);
  const { home, env } = shellWithUsersctl(t, target.url);
  const usersctlBin = (args: string[]) => runTool(t, process.execPath, [CLI_BIN, ...args], { env });
  const cut = await usersctlBin(['--url', source.url, '--retries', '0', 'export']);
  assert.equal(cut.code, EXIT.server, cut.stderr);
  assert.deepEqual(
    lines(cut.stdout),
    [
      HEADER,
      '{"id":1,"alias":"ann","user":{"name":"Ann","id":1}}',
      '{"id":2,"alias":null,"user":{"name":"Bob","id":2}}',
    ],
    'no end record',
  );
  writeFileSync(join(home, 'cut.ndjson'), cut.stdout);
  const imported = await usersctlBin(['import', join(home, 'cut.ndjson')]);
  assert.equal(imported.code, EXIT.partialImport, imported.stderr);
  assert.equal(
    imported.stderr,
    'usersctl: the export was cut short: it ends after 2 users without its end record (an export stopped early, by Ctrl-C, a full disk or a lost connection); 2 of them were imported: export again and import that\n',
  );
  assert.deepEqual(
    results(imported.stdout).map((r) => r.action),
    ['created', 'created'],
  );

  const whole = await startTestServer(t);
  await populate(whole);
  const exported = await usersctlBin(['--url', whole.url, 'export']);
  assert.equal(exported.code, EXIT.ok, exported.stderr);
  assert.deepEqual(
    [lines(exported.stdout)[0], lines(exported.stdout).at(-1)],
    [HEADER, '{"usersctl":"end","users":4}'],
  );
  writeFileSync(join(home, 'whole.ndjson'), exported.stdout);
  const again = await usersctlBin(['import', join(home, 'whole.ndjson')]);
  assert.deepEqual([again.code, again.stderr, results(again.stdout).length], [EXIT.ok, '', 4]);

  writeFileSync(join(home, 'old.ndjson'), `${OLD_HEADER}\n{"id":7,"alias":"old","user":{"name":"Old","id":7}}\n`);
  const old = await usersctlBin(['import', join(home, 'old.ndjson')]);
  assert.deepEqual([old.code, old.stderr, results(old.stdout).map((r) => r.action)], [EXIT.ok, '', ['created']]);
});

test('an export whose end record counts other records than came before it is reported damaged (exit 8), and a line after its end record is a failed result, not sent', async (t) => {
  const cli = await startCliServer(t);
  const input = `${HEADER}\n{"id":1,"alias":"ann","user":{"name":"Ann","id":1}}\n{"usersctl":"end","users":2}\n{"id":2,"alias":"bob","user":{"name":"Bob","id":2}}\n\n`;
  const imported = await cli.run(['import'], { stdin: input });
  assert.equal(imported.code, EXIT.partialImport);
  assert.deepEqual(
    results(imported.stdout).map((r) => [r.line, r.ok, r.error]),
    [
      [2, true, undefined],
      [4, false, 'a line after the end record of the export; it was not sent'],
    ],
  );
  assert.deepEqual(lines(imported.stderr), [
    'usersctl: the export is damaged: its end record counts 2 users, but 1 came before it; export again and import that',
    'usersctl: 1 of 2 lines failed; their results on stdout say why',
  ]);
  assert.equal((await send(cli.server.url, 'GET', '/users/bob')).status, 404);
});
