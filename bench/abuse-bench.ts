/**
 * Abusive clients (issue 19, "Denial of service"), measured from outside
 * against the built server; nothing here is asserted, the figures are
 * printed (docs/operations.md "Abusive clients" records them).
 *
 * - pipeline: N connections each send K pipelined GETs and never read an
 *   answer; meanwhile one well-behaved client sends GETs one at a time.
 *   Prints that client's latencies (median, p99, max), how many of the
 *   flood's connections the server closed, and the server's peak RSS.
 * - login: a flood of POST /login with ever-new account names at R per
 *   second, while one client does durable PUTs and a real account logs in
 *   now and then. Prints PUT p99, the flood's statuses, and the real logins.
 *
 * - connections: a heavy client's 256 connections from one address, then
 *   one address holding thousands open while another sends GETs.
 *
 * Run: npm run build && node --import tsx bench/abuse-bench.ts [--part connections|pipeline|login]
 *      [--connections 1000] [--pipelined 3000] [--seconds 10] [--rate 500]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request, Agent } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { track } from '../test/children.js';
import { ADMIN_PASSWORD, peakRss, percentile, spawnServer, type ServerProcess } from './store-bench.js';

const { values } = parseArgs({
  options: {
    part: { type: 'string', default: 'all' },
    connections: { type: 'string', default: '1000' },
    pipelined: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '10' },
    rate: { type: 'string', default: '500' },
    'password-cost': { type: 'string', default: '15' },
    /** Another build's bin/users-server.js, to measure it the same way (a baseline). */
    server: { type: 'string' },
    /** Internal: run as the connection flood's process (PORT:TARGET). */
    flood: { type: 'string' },
  },
});
const SECONDS = Number(values.seconds);

function summary(name: string, ms: number[]): string {
  const sorted = [...ms].sort((a, b) => a - b);
  return `${name}: ${sorted.length} requests, median ${percentile(sorted, 0.5).toFixed(1)} ms, p99 ${percentile(sorted, 0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms`;
}

// The well-behaved client comes from another address than the flood (all of 127/8 is this host).
const agent = new Agent({ keepAlive: true, maxSockets: 1, localAddress: '127.0.0.2' });

function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(`${url}${path}`, { method, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
    });
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    req.end(body);
  });
}

/** GETs one at a time for `seconds`, each latency in ms. */
async function wellBehaved(url: string, seconds: number): Promise<number[]> {
  const times: number[] = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) times.push((await send(url, 'GET', '/users/1')).ms);
  return times;
}

async function pipelineFlood(server: ServerProcess): Promise<void> {
  const { port } = new URL(server.url);
  const connections = Number(values.connections);
  const pipelined = Number(values.pipelined);
  const burst = Buffer.from(`GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`.repeat(pipelined));
  const sockets: Socket[] = [];
  for (let i = 0; i < connections; i++) {
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => {});
    // Never read: no 'data' listener, and the socket stays paused.
    socket.pause();
    socket.write(burst);
    sockets.push(socket);
  }
  const times = await wellBehaved(server.url, SECONDS);
  console.log(`pipeline flood: ${connections} connections x ${pipelined} pipelined GETs, never read`);
  console.log(`  ${summary('well-behaved GET /users/1', times)}`);
  console.log(`  server peak RSS: ${(peakRss(server.pid) / 1024 / 1024).toFixed(0)} MiB`);
  for (const socket of sockets) socket.destroy();
}

/** Logs in as admin: the session cookie, or undefined with the status. */
function adminLogin(url: string, cookie?: string): Promise<{ status: number; ms: number; cookie?: string }> {
  const started = performance.now();
  const headers: Record<string, string> = {
    authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`,
  };
  if (cookie !== undefined) headers.cookie = cookie;
  return new Promise((resolve) => {
    const req = request(`${url}/login`, { method: 'POST', headers, localAddress: '127.0.0.3' }, (res) => {
      res.resume();
      const set = res.headers['set-cookie']?.[0]?.split(';')[0];
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          ms: performance.now() - started,
          ...(set !== undefined && { cookie: set }),
        }),
      );
    });
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    req.end();
  });
}

async function loginFlood(server: ServerProcess): Promise<void> {
  const rate = Number(values.rate);
  const statuses: Record<number, number> = {};
  let n = 0;
  const { cookie } = await adminLogin(server.url);
  const flood = setInterval(() => {
    for (let i = 0; i < rate / 20; i++) {
      const auth = Buffer.from(`nobody-${n++}:wrong`).toString('base64');
      const req = request(
        `${server.url}/login`,
        { method: 'POST', headers: { authorization: `Basic ${auth}` } },
        (res) => {
          statuses[res.statusCode ?? 0] = (statuses[res.statusCode ?? 0] ?? 0) + 1;
          res.resume();
        },
      );
      req.on('error', () => (statuses[0] = (statuses[0] ?? 0) + 1));
      req.end();
    }
  }, 50);
  const until = performance.now() + SECONDS * 1000;
  const puts: number[] = [];
  const logins: { status: number; ms: number }[] = [];
  await Promise.all([
    (async () => {
      for (let i = 0; performance.now() < until; i++)
        puts.push(
          (
            await send(
              server.url,
              'PUT',
              '/users/1',
              { 'content-type': 'application/json' },
              JSON.stringify({ name: `n${i}` }),
            )
          ).ms,
        );
    })(),
    (async () => {
      while (performance.now() < until) logins.push(await adminLogin(server.url, cookie));
    })(),
  ]);
  clearInterval(flood);
  console.log(
    `login flood: about ${rate} logins a second with unknown names, --password-cost ${values['password-cost']}`,
  );
  console.log(`  ${summary('durable PUT /users/1', puts)}`);
  console.log(`  the flood's answers: ${JSON.stringify(statuses)}`);
  const ok = logins.filter((l) => l.status === 200);
  console.log(
    `  a signed-in admin logging in again: ${ok.length} of ${logins.length} answered 200; ${summary(
      'their latency',
      ok.map((l) => l.ms),
    )}`,
  );
}

async function withServer(run: (server: ServerProcess) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'users-abuse-'));
  const server = await spawnServer(
    ['--port', '0', '--data', join(dir, 'data'), '--log-format', 'off', '--password-cost', values['password-cost']],
    { stdoutFile: join(dir, 'out'), ...(values.server !== undefined && { script: values.server }) },
  );
  try {
    await send(server.url, 'PUT', '/users/1', { 'content-type': 'application/json' }, '{"name":"One"}');
    await run(server);
  } finally {
    server.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Both sides of the connection limits: a heavy client holding 256
 * keep-alive connections from one address is served in full; then one
 * address keeps opening connections (`--connections` at a time, again as
 * the server closes them) while a well-behaved client from another
 * address sends GETs one at a time.
 */
async function connectionFlood(server: ServerProcess): Promise<void> {
  const port = Number(new URL(server.url).port);
  const opened = (localAddress: string) =>
    new Promise<Socket>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(socket));
      socket.on('error', () => resolve(socket));
    });
  const heavy = await Promise.all(Array.from({ length: 256 }, () => opened('127.0.0.1')));
  const statuses = await Promise.all(
    heavy.map(
      (socket) =>
        new Promise<string>((resolve) => {
          socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1').slice(9, 12)));
          socket.once('close', () => resolve('closed'));
          socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
        }),
    ),
  );
  const served = statuses.filter((s) => s === '200').length;
  console.log(`connection flood: a client with 256 keep-alive connections from one address: ${served} of 256 served`);
  for (const socket of heavy) socket.destroy();
  const target = Number(values.connections);
  // The flood runs in a process of its own, so that its CPU is not the well-behaved client's.
  const flood = spawn(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), '--flood', `${port}:${target}`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  track(flood);
  const lines = createInterface({ input: flood.stdout! });
  const next = () => new Promise<string>((resolve) => lines.once('line', resolve));
  await next(); // "open": the flood holds its connections
  const times = await wellBehaved(server.url, SECONDS);
  flood.kill('SIGTERM');
  const { made, shed } = JSON.parse(await next()) as { made: number; shed: number };
  console.log(
    `  one address keeping ${target} connections open from another process (${made} opened, ${shed} closed by the server) while another sends GETs:`,
  );
  console.log(`  ${summary('well-behaved GET /users/1', times)}`);
  console.log(`  server peak RSS: ${(peakRss(server.pid) / 1024 / 1024).toFixed(0)} MiB`);
}

/**
 * The flood's process (`--flood PORT:TARGET`): keeps TARGET connections
 * from 127.0.0.3 open, opening a new one as the server closes one, says
 * "open" once it first holds them all, and on SIGTERM prints how many it
 * opened and how many the server closed, as JSON, and exits.
 */
function floodProcess(spec: string): void {
  const [port, target] = spec.split(':').map(Number) as [number, number];
  let open = 0;
  let made = 0;
  let connected = 0;
  let shed = 0;
  const refill = () => {
    while (open < target) {
      open++;
      made++;
      const socket = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.3' }, () => {
        if (++connected === target) console.log('open');
      });
      socket.on('error', () => {});
      socket.once('close', () => {
        open--;
        shed++;
        setImmediate(refill);
      });
    }
  };
  refill();
  process.once('SIGTERM', () => {
    console.log(JSON.stringify({ made, shed }));
    process.exit(0);
  });
}

if (values.flood !== undefined) floodProcess(values.flood);
else await runParts();

async function runParts(): Promise<void> {
  if (values.part === 'all' || values.part === 'connections') await withServer(connectionFlood);
  if (values.part === 'all' || values.part === 'pipeline') await withServer(pipelineFlood);
  if (values.part === 'all' || values.part === 'login') await withServer(loginFlood);
  agent.destroy();
  process.exit(0);
}
