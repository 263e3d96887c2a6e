#!/usr/bin/env node
/**
 * A peer of users-server on fastify 5, for the throughput chart
 * (bench/throughput-chart.ts): the same two requests the chart measures,
 * with what users-server's contract makes every answer carry, written the
 * way a fastify user would, in memory.
 *
 *   GET /users/:id  200 the stored JSON with a strong ETag, or 404
 *   PUT /users/:id  body {"name": string, ...}: 201 on create, 200 on
 *                   replace, with the stored JSON, its ETag and
 *                   Content-Location; 422 when name is not a string
 *   every answer    X-Request-Id, and an access log line on stdout in
 *                   users-server's text format
 *
 * Usage: node bench/fastify-peer.mjs [--host 127.0.0.1] [--port 8080]
 * Prints `listening on http://HOST:PORT` (the real port with --port 0).
 */
import { hash, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Fastify from 'fastify';

const { values } = parseArgs({
  options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '8080' } },
});

/** @type {Map<number, { json: string, etag: string }>} */
const users = new Map();
const idPrefix = randomBytes(6).toString('hex') + '-';
let requests = 0;
let pending = '';

const app = Fastify({ logger: false, genReqId: () => idPrefix + (++requests).toString(36) });

app.addHook('onRequest', async (request, reply) => {
  request.startedAt = performance.now();
  reply.header('X-Request-Id', request.id);
});

app.addHook('onResponse', async (request, reply) => {
  if (pending === '')
    setImmediate(() => {
      process.stdout.write(pending);
      pending = '';
    });
  const ms = (performance.now() - request.startedAt).toFixed(2);
  pending += `${new Date().toISOString()} ${request.method} ${request.url} ${reply.statusCode} ${ms}ms req=${request.id}\n`;
});

const stored = (json) => ({ json, etag: `"${hash('sha256', json, 'base64url').slice(0, 27)}"` });

app.get('/users/:id', async (request, reply) => {
  const user = users.get(Number(request.params.id));
  if (user === undefined) return reply.code(404).type('application/problem+json').send('{"status":404}');
  return reply.header('ETag', user.etag).type('application/json').send(user.json);
});

app.put('/users/:id', async (request, reply) => {
  const id = Number(request.params.id);
  const body = request.body;
  if (typeof body !== 'object' || body === null || typeof body.name !== 'string')
    return reply.code(422).type('application/problem+json').send('{"status":422}');
  const existed = users.has(id);
  const user = stored(JSON.stringify({ ...body, id }));
  users.set(id, user);
  return reply
    .code(existed ? 200 : 201)
    .header('ETag', user.etag)
    .header(existed ? 'Content-Location' : 'Location', `/users/${id}`)
    .type('application/json')
    .send(user.json);
});

const address = await app.listen({ host: values.host, port: Number(values.port) });
console.log(`listening on ${address}`);
for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => void app.close().then(() => process.exit(0)));
