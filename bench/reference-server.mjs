#!/usr/bin/env node
/**
 * The reference server of `npm run bench` (issue 5): the practical upper
 * bound for a Node HTTP service of users on this machine.
 *
 * A minimal node:http server with a hand-written router and a Map, in
 * memory, with no other features: no sessions, no ETags, no durability, no
 * content negotiation, no body limit.
 *
 *   GET /users/<digits>  200 the stored JSON, or 404
 *   PUT /users/<digits>  body {"name": string, ...}: 201 on create, 200 on
 *                        replace, with the stored {"id","name"}; 400 when the
 *                        body is not JSON, 422 when name is not a string
 *   anything else        404 (unknown path) or 405 (another method)
 *
 * `--floor`: every request is answered 200 with the same constant body,
 * without routing or reading the request body: the floor, i.e. the cost of
 * node:http alone.
 *
 * `--contract`: also what users-server's contract asks of these answers and
 * that costs something per request, done the cheapest way: an X-Request-Id
 * on every answer (a counter), a strong ETag on a GET's 200 (a SHA-256 kept
 * with the stored JSON), Content-Location on a replacing PUT, and a PUT body
 * checked to be UTF-8 (400 otherwise). `--log` adds an access log line per
 * answer on stdout, in users-server's text format, written once per turn of
 * the event loop. With both it is the ceiling of a users service on
 * node:http (bench/reference-ceiling.ts measures what they cost).
 *
 * Plain JavaScript so that it runs as `node bench/reference-server.mjs`, with
 * no loader in front of it, like users-server runs from dist/.
 *
 * Usage: node bench/reference-server.mjs [--host 127.0.0.1] [--port 8080] [--floor | --contract [--log]]
 * Prints `listening on http://HOST:PORT` (the real port with --port 0).
 */
import { isUtf8 } from 'node:buffer';
import { hash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

const PREFIX = '/users/';
const FLOOR_BODY = '{"name":"Grace Hopper 4821","id":1}';
const NOT_FOUND = '{"status":404}';
const NOT_ALLOWED = '{"status":405}';
const BAD_JSON = '{"status":400}';
const BAD_NAME = '{"status":422}';

/** @type {Map<number, string>} id -> the stored JSON */
const users = new Map();
/** @type {Map<number, string>} id -> the stored JSON's ETag (--contract) */
const etags = new Map();

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '8080' },
    floor: { type: 'boolean', default: false },
    contract: { type: 'boolean', default: false },
    log: { type: 'boolean', default: false },
  },
});
const contract = values.contract;
const idPrefix = randomBytes(6).toString('hex') + '-';
let idCounter = 0;
let pending = '';
let lastMs = -1;
let lastTime = '';
const flush = () => {
  process.stdout.write(pending);
  pending = '';
};

function send(res, status, body, extra) {
  if (!contract) {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  const length = Buffer.byteLength(body);
  const id = idPrefix + (++idCounter).toString(36);
  const headers = extra === undefined ? [] : extra;
  headers.push('Content-Type', 'application/json', 'Content-Length', String(length), 'X-Request-Id', id);
  res.writeHead(status, headers);
  res.end(body);
  if (values.log) logLine(res.req, status, length, id);
}

/** users-server's text access log line (server/ops/access-log.ts), without its escaping of odd targets. */
function logLine(req, status, bytes, id) {
  const ms = performance.now() - req.startedAt;
  const hundredths = Math.round(ms * 100);
  const fraction = hundredths % 100;
  if (pending === '') setImmediate(flush);
  const now = Math.floor(Date.now());
  if (now !== lastMs) {
    lastMs = now;
    lastTime = new Date(now).toISOString();
  }
  pending += `${lastTime} ${req.method} ${req.url} ${status} ${(hundredths - fraction) / 100}.${fraction < 10 ? '0' : ''}${fraction}ms ${bytes}B req=${id}\n`;
}

/** The id in `/users/<digits>`, or -1 for any other path. */
function idOf(url) {
  if (!url.startsWith(PREFIX) || url.length === PREFIX.length || url.length > PREFIX.length + 15) return -1;
  let id = 0;
  for (let i = PREFIX.length; i < url.length; i++) {
    const digit = url.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    id = id * 10 + digit;
  }
  return id;
}

function put(req, res, id) {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    let body;
    try {
      const raw = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      if (contract && !isUtf8(raw)) throw new Error('not UTF-8');
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      send(res, 400, BAD_JSON);
      return;
    }
    if (body === null || typeof body !== 'object' || typeof body.name !== 'string') {
      send(res, 422, BAD_NAME);
      return;
    }
    const json = JSON.stringify({ id, name: body.name });
    const status = users.has(id) ? 200 : 201;
    users.set(id, json);
    if (contract) etags.set(id, `"${hash('sha256', json, 'base64url').slice(0, 27)}"`);
    send(res, status, json, contract ? [status === 200 ? 'Content-Location' : 'Location', PREFIX + id] : undefined);
  });
}

function handle(req, res) {
  if (values.log) req.startedAt = performance.now();
  const id = idOf(req.url);
  if (id === -1) {
    send(res, 404, NOT_FOUND);
    return;
  }
  switch (req.method) {
    case 'GET': {
      const json = users.get(id);
      if (json === undefined) send(res, 404, NOT_FOUND);
      else send(res, 200, json, contract ? ['ETag', etags.get(id)] : undefined);
      return;
    }
    case 'PUT':
      put(req, res, id);
      return;
    default:
      res.setHeader('Allow', 'GET, PUT');
      send(res, 405, NOT_ALLOWED);
  }
}

function floor(_req, res) {
  send(res, 200, FLOOR_BODY);
}

if (values.log && !contract) {
  process.stderr.write('reference-server: --log goes with --contract (the log line carries the request id)\n');
  process.exit(2);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write('reference-server: --port must be an integer from 0 to 65535\n');
  process.exit(2);
}

// The same transport timeouts as users-server (server/listen.ts), so that
// only the work done per request differs.
const server = createServer(
  { headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000, connectionsCheckingInterval: 2_000 },
  values.floor ? floor : handle,
);
server.listen(port, values.host, () => {
  const address = server.address();
  const host = values.host.includes(':') ? `[${values.host}]` : values.host;
  process.stdout.write(`listening on http://${host}:${address.port}\n`);
});
// Nothing to flush: everything is in memory.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));
