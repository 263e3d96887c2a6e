/**
 * One users-server on PostgreSQL under a steady GET load, window after
 * window: whether its rate holds over time (docs/performance.md, "The
 * driver's queues"). The driver's connection queues grow by one slot per
 * query under load unless its pool is replaced now and then
 * (server/store/postgres/driver.ts, RECYCLE_AFTER); this shows the rate
 * of each window, which falls window after window when they grow.
 *
 * Run: npm run build && node --import tsx bench/postgres-sustain.ts [--windows 8] [--seconds 5] [--connections 48]
 * (needs PostgreSQL's server binaries; starts its own cluster, as the tests do).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { postgresSkipReason, testDatabase } from '../test/postgres.js';
import { LOAD_FLAGS, preloadUsers, requestPool, runLoad, spawnServer } from './store-bench.js';

const { values } = parseArgs({
  options: {
    windows: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '48' },
  },
});
const USERS = 1000;

const skip = postgresSkipReason();
if (skip !== undefined) throw new Error(skip);
const dir = mkdtempSync(join(tmpdir(), 'users-pg-sustain-'));
const store = await testDatabase(undefined, { durable: true });
const server = await spawnServer(
  ['--port', '0', '--data', join(dir, 'data'), '--store', store, '--log-format', 'off', ...LOAD_FLAGS],
  { stdoutFile: join(dir, 'out') },
);
try {
  await preloadUsers(server.url, USERS, 32);
  const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))![1]) / 1024;
  for (let window = 1; window <= Number(values.windows); window++) {
    const requests = requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
    const result = await runLoad({
      url: server.url,
      connections: Number(values.connections),
      seconds: Number(values.seconds),
      requests,
    });
    console.log(`window ${window}: ${Math.round(result.rps)} GETs a second, server RSS ${rssMiB().toFixed(0)} MiB`);
  }
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
