import assert from 'node:assert/strict';
import { test } from 'node:test';
import { put, send, startTestServer } from './helpers.js';

test('a PUT through an alias creates a user that GET returns with its id', async (t) => {
  const server = await startTestServer(t);
  const created = await put(server.url, '/users/alice', { name: 'Alice' });
  assert.equal(created.status, 201);
  assert.equal(created.headers.location, '/users/1');
  const read = await send(server.url, 'GET', '/users/1');
  assert.equal(read.status, 200);
  assert.deepEqual(read.json(), { name: 'Alice', id: 1 });
});
