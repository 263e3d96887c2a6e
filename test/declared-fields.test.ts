/**
 * Declared fields (API.md "Declared fields: indexes, uniqueness, case") as
 * an operator meets them, over real sockets: what a data directory
 * declares is kept in an index from the start, a unique field answers 409
 * unique-violation naming the field and the user that holds the value,
 * a case-insensitive one compares and sorts lowercased, and a restart
 * builds the indexes again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { writeDeclarationsFile } from '../server/store/declarations-file.js';
import { assertProblem, send, startTestServer, tempDir, type TestServer } from './helpers.js';

const EMAIL = { path: 'email', unique: true, caseInsensitive: true };

async function create(server: TestServer, body: Record<string, unknown>) {
  return send(server.url, 'POST', '/users/new', { json: body });
}

async function namesFound(server: TestServer, query: Record<string, string>): Promise<string[]> {
  const reply = await send(server.url, 'GET', `/users?${new URLSearchParams(query)}`);
  assert.equal(reply.status, 200, reply.text);
  return (reply.json() as { items: { name: string }[] }).items.map((u) => u.name);
}

test('a data directory that declares email unique and case-insensitive: 409 for a taken email in any case, lowercased finds and sorts, and the same after a restart', async (t) => {
  const data = tempDir(t);
  writeDeclarationsFile(data, [EMAIL]);
  let server = await startTestServer(t, { data });
  for (const [name, email] of [
    ['Ann', 'Ann@Example.org'],
    ['bob', 'bob@example.org'],
    ['Cy', 'cy@EXAMPLE.org'],
  ])
    assert.equal((await create(server, { name, email })).status, 201);
  assert.equal((await create(server, { name: 'Nobody' })).status, 201, 'users without the member never conflict');
  assert.equal((await create(server, { name: 'Nobody again' })).status, 201);
  const check = async () => {
    const taken = await send(server.url, 'PUT', '/users/someone', {
      json: { name: 'Someone', email: 'ANN@example.ORG' },
    });
    const problem = assertProblem(taken, 409, 'unique-violation');
    assert.equal(problem.field, 'email');
    assert.equal(problem.conflictsWith, '/users/1');
    assert.match(String(problem.detail), /\/users\/1 already holds this value of email/);
    assert.deepEqual(await namesFound(server, { filter: 'email eq "ann@EXAMPLE.ORG"' }), ['Ann']);
    assert.deepEqual(await namesFound(server, { filter: 'email sw "C"' }), ['Cy']);
    assert.deepEqual(await namesFound(server, { sort: '-email', filter: 'email pr' }), ['Cy', 'bob', 'Ann']);
  };
  await check();
  await server.running.stop();
  server = await startTestServer(t, { data });
  await check();
  // Deleting a user frees its values.
  assert.equal((await send(server.url, 'DELETE', '/users/1')).status, 204);
  assert.equal((await create(server, { name: 'Ann 2', email: 'ann@example.org' })).status, 201);
});
