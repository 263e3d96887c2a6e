/**
 * The example scripts of docs/cli.md "Scripting" run as written (issue 20):
 * each ```sh block that starts with #!/bin/sh in that section is written to
 * a file and run with `usersctl` (the built bin/usersctl.js) and jq on PATH
 * against a server. Skips when sh or jq is missing.
 */
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { put, send, startTestServer } from './helpers.js';
import { shellWithUsersctl } from './cli-helpers.js';
import { runTool } from './processes.js';

const DOC = fileURLToPath(new URL('../docs/cli.md', import.meta.url));

/** The scripts of the Scripting section, by the file name their second line gives. */
function scripts(): Map<string, string> {
  const text = readFileSync(DOC, 'utf8');
  const section = text.slice(text.indexOf('\n## Scripting'), text.indexOf('\n## ', text.indexOf('\n## Scripting') + 1));
  const found = new Map<string, string>();
  for (const match of section.matchAll(/```sh\n(#!\/bin\/sh\n# ([\w-]+\.sh)[^\n]*\n[\s\S]*?)```/g))
    found.set(match[2]!, match[1]!);
  return found;
}

async function setup(t: TestContext) {
  for (const tool of ['sh', 'jq']) {
    if ((await runTool(t, 'sh', ['-c', `command -v ${tool}`]).catch(() => undefined))?.code !== 0) return undefined;
  }
  const server = await startTestServer(t);
  const { home, env } = shellWithUsersctl(t, server.url);
  for (const [name, body] of scripts()) {
    writeFileSync(join(home, name), body);
    chmodSync(join(home, name), 0o755);
  }
  const run = (script: string, ...args: string[]) =>
    runTool(t, 'sh', ['-c', `cd "$HOME" && ./${script} "$@"`, 'sh', ...args], { env });
  return { server, run };
}

test('docs/cli.md "Scripting" holds the three scripts this test runs', () => {
  assert.deepEqual([...scripts().keys()].sort(), ['delete-tests.sh', 'ensure-user.sh', 'rename.sh']);
});

test('ensure-user.sh creates a missing user, and leaves an existing one as it is', async (t) => {
  const s = await setup(t);
  if (s === undefined) return t.skip('sh or jq not found');
  const first = await s.run('ensure-user.sh', 'ann', 'Ann');
  assert.equal(first.code, 0, first.stderr);
  assert.equal(JSON.parse(first.stdout).name, 'Ann');
  const again = await s.run('ensure-user.sh', 'ann', 'Other');
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).name, 'Ann');
});

test('rename.sh renames and keeps the other fields; a ref that names nobody exits 3', async (t) => {
  const s = await setup(t);
  if (s === undefined) return t.skip('sh or jq not found');
  await put(s.server.url, '/users/bob', { name: 'Bob', team: 'blue' });
  const renamed = await s.run('rename.sh', 'bob', 'Robert');
  assert.equal(renamed.code, 0, renamed.stderr);
  assert.deepEqual(JSON.parse((await send(s.server.url, 'GET', '/users/bob')).text), {
    name: 'Robert',
    team: 'blue',
    id: 1,
  });
  const missing = await s.run('rename.sh', 'nobody', 'X');
  assert.equal(missing.code, 3, missing.stderr);
});

test('delete-tests.sh deletes the users named Test..., keeps the others, and says how many', async (t) => {
  const s = await setup(t);
  if (s === undefined) return t.skip('sh or jq not found');
  for (const name of ['Test 1', 'Keep', 'Test 2']) await send(s.server.url, 'POST', '/users/new', { json: { name } });
  const result = await s.run('delete-tests.sh');
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stderr, /^deleted 2 users \(exit 0\)$/m);
  const left = JSON.parse((await send(s.server.url, 'GET', '/users')).text) as { items: { name: string }[] };
  assert.deepEqual(
    left.items.map((u) => u.name),
    ['Keep'],
  );
});
