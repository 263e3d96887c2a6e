/**
 * What PostgreSQL faults cost users-server instances, side by side with
 * the same faults and no instances:
 *
 * - `pg_ctl restart -m fast` of an idle database, then of the same
 *   database while three instances serve a load of GETs and PUTs: how long
 *   each restart takes, the longest a request waited during it, and how
 *   long after the database accepted connections again each instance
 *   answered (served or 503);
 * - then kill -9 of one instance and pg_terminate_backend of every
 *   session, and SIGTERM of the others: how long each took to exit
 *   (API.md: within --db-timeout + 1 s).
 *
 * Run: node --import tsx bench/db-faults.ts [--rounds 3] (after `npm run build`;
 * needs PostgreSQL's server binaries).
 */
import { Agent, request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { postgresCluster, postgresSkipReason, restartPostgres, testDatabase } from '../test/postgres.js';
import { connect } from '../server/store/postgres/driver.js';
import { fmt, median, spawnServer, type ServerProcess } from './store-bench.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, clients: { type: 'string', default: '12' } },
});
const ROUNDS = Number(values.rounds);
const CLIENTS = Number(values.clients);

interface Answer {
  method: string;
  status: number;
  sent: number;
  answered: number;
}

/** One request with keep-alive; status 0 for a failed connection. */
function call(agent: Agent, url: string, method: string, path: string, body?: string): Promise<Answer> {
  const sent = performance.now();
  return new Promise((resolve) => {
    const req = request(
      `${url}${path}`,
      { method, agent, headers: body === undefined ? {} : { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ method, status: res.statusCode!, sent, answered: performance.now() }));
      },
    );
    req.on('error', () => resolve({ method, status: 0, sent, answered: performance.now() }));
    req.end(body);
  });
}

/** CLIENTS loops of GET and PUT spread over the instances until `stop`; every answer recorded. */
function load(urls: readonly string[]): { answers: Answer[]; stop(): Promise<void> } {
  const answers: Answer[] = [];
  let running = true;
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });
  const loops = Array.from({ length: CLIENTS }, async (_, i) => {
    const url = urls[i % urls.length]!;
    for (let n = 0; running; n++) {
      const id = 1 + ((i * 7 + n) % 50);
      answers.push(
        await (n % 2 === 0
          ? call(agent, url, 'GET', `/users/${id}`)
          : call(agent, url, 'PUT', `/users/${id}`, JSON.stringify({ name: `n${n}` }))),
      );
    }
  });
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

async function round(dir: string, index: number): Promise<Record<string, number>> {
  const idle = await restartPostgres();
  const url = await testDatabase(undefined);
  const servers: ServerProcess[] = [];
  for (let i = 0; i < 3; i++)
    servers.push(
      await spawnServer(['--port', '0', '--store', url, '--log-format', 'off', '--data', join(dir, `d${index}-${i}`)], {
        stdoutFile: join(dir, `out-${index}-${i}`),
      }),
    );
  const urls = servers.map((s) => s.url);
  for (let id = 1; id <= 50; id++) await call(new Agent(), urls[0]!, 'PUT', `/users/${id}`, '{"name":"x"}');
  // The issue's order: one instance killed, the database restarted under load, every session terminated.
  servers[0]!.child.kill('SIGKILL');
  const running = load(urls.slice(1));
  await new Promise((r) => setTimeout(r, 500));
  const before = performance.now();
  const loaded = await restartPostgres();
  const accepting = performance.now();
  // Each instance's first answer sent after the database accepted again.
  const firstAfter = await Promise.all(
    urls.slice(1).map(async (u) => (await call(new Agent(), u, 'GET', '/users/1')).answered - accepting),
  );
  await new Promise((r) => setTimeout(r, 300));
  await running.stop();
  const during = running.answers.filter((a) => a.sent >= before && a.sent < accepting);
  const longest = Math.max(
    0,
    ...running.answers.filter((a) => a.answered >= before).map((a) => a.answered - Math.max(a.sent, before)),
  );
  const slow = running.answers.filter((a) => a.sent < accepting && a.answered > accepting + 1000);
  if (slow.length > 0)
    console.log(
      `  answered over 1 s after accepting: ${slow.map((a) => `${a.method} ${a.status} sent ${Math.round(a.sent - accepting)} ms, answered ${Math.round(a.answered - accepting)} ms after accepting`).join('; ')}`,
    );
  const stalledAfter = Math.max(
    0,
    ...running.answers.filter((a) => a.answered > accepting).map((a) => a.answered - Math.max(a.sent, accepting)),
  );

  // Faults, then SIGTERM of the survivors.
  const faulty = load(urls.slice(1));
  const admin = await connect(url, { max: 1 });
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'users-server' and pid <> pg_backend_pid()`;
  await admin.end();
  await new Promise((r) => setTimeout(r, 300));
  await faulty.stop();
  const exits = await Promise.all(
    servers.slice(1).map(async (s) => {
      const t0 = performance.now();
      s.child.kill('SIGTERM');
      await new Promise((r) => s.child.once('exit', r));
      return performance.now() - t0;
    }),
  );
  return {
    idle,
    loaded,
    longest,
    stalledAfter,
    firstAfter: Math.max(...firstAfter),
    duringCount: during.length,
    exit: Math.max(...exits),
  };
}

async function main(): Promise<void> {
  const skip = postgresSkipReason();
  if (skip !== undefined) {
    console.log(`db-faults: skipped: ${skip}`);
    return;
  }
  // PostgreSQL's own fsync on, as in production: its shutdown checkpoint is part of a restart.
  await testDatabase(undefined, { durable: true });
  await postgresCluster();
  const dir = mkdtempSync(join(tmpdir(), 'users-db-faults-'));
  try {
    const rows: Record<string, number>[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const row = await round(dir, i);
      rows.push(row);
      console.log(
        `round ${i + 1}: restart idle ${fmt(row.idle!, 0)} ms, under load ${fmt(row.loaded!, 0)} ms (ratio ${(row.loaded! / row.idle!).toFixed(2)}); longest wait ${fmt(row.longest!, 0)} ms; after accepting: longest wait ${fmt(row.stalledAfter!, 0)} ms, each instance answered within ${fmt(row.firstAfter!, 0)} ms; SIGTERM after faults: exit within ${fmt(row.exit!, 0)} ms`,
      );
    }
    const m = (key: string) => median(rows.map((r) => r[key]!));
    console.log(
      `median: restart ${fmt(m('loaded'), 0)} ms under load vs ${fmt(m('idle'), 0)} ms idle (ratio ${(m('loaded') / m('idle')).toFixed(2)}); answered ${fmt(m('firstAfter'), 0)} ms after accepting; exit ${fmt(m('exit'), 0)} ms after SIGTERM`,
    );
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.exit();
}

await main();
