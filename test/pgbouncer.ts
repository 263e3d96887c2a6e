/**
 * A pgbouncer in transaction pooling mode in front of the test cluster
 * (test/postgres.ts): one per test process, started on first use from
 * Debian's `pgbouncer` binary, as the `postgres` user when this process is
 * root (pgbouncer refuses to run as root), killed when the process exits.
 * Where the binary is missing, `pgbouncerSkipReason()` says why.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { track } from './children.js';
import { postgresCluster, postgresSkipReason, testDatabase } from './postgres.js';
import { serverPort } from './processes.js';

const BINARY = '/usr/sbin/pgbouncer';

/** Why tests through pgbouncer cannot run here, or undefined when they can. */
export function pgbouncerSkipReason(): string | undefined {
  const postgres = postgresSkipReason();
  if (postgres !== undefined) return postgres;
  if (!existsSync(BINARY)) return `no ${BINARY} (Debian: apt-get install pgbouncer)`;
  return undefined;
}

let started: Promise<number> | undefined;

/** The user and group ids of `postgres` when this process is root (pgbouncer's owner then), else undefined. */
function owner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString()),
  };
}

/** Starts pgbouncer in front of the cluster; resolves with its port once it listens. */
async function startPgbouncer(): Promise<number> {
  const cluster = await postgresCluster();
  const port = await serverPort();
  const dir = mkdtempSync(join(tmpdir(), 'users-pgbouncer-'));
  const ini = join(dir, 'pgbouncer.ini');
  writeFileSync(
    ini,
    [
      '[databases]',
      // Every database name, on the test cluster, as its superuser.
      `* = host=127.0.0.1 port=${cluster.port} user=postgres`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      'pool_mode = transaction',
      'max_client_conn = 2000',
      'default_pool_size = 20',
      '',
    ].join('\n'),
  );
  const ids = owner();
  if (ids !== undefined) chownSync(dir, ids.uid, ids.gid);
  const child = spawn(BINARY, [ini], { stdio: ['ignore', 'ignore', 'pipe'], ...ids });
  track(child);
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  await new Promise<void>((resolve, reject) => {
    let log = '';
    child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      log += text;
      if (/process up/.test(log)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`pgbouncer exited (${code}) before it listened:\n${log}`)));
  });
  // Killed at exit (track); it does not keep the process alive.
  child.stderr!.resume();
  (child.stderr as unknown as { unref(): void }).unref();
  child.unref();
  return port;
}

/**
 * A fresh migrated database for this test (testDatabase), reached through the process's pgbouncer: its URL, with
 * `?pool_mode=transaction`.
 */
export async function pgbouncerDatabase(
  t: TestContext,
  options: Parameters<typeof testDatabase>[1] = {},
): Promise<string> {
  const direct = new URL(await testDatabase(t, options));
  started ??= startPgbouncer();
  direct.port = String(await started);
  direct.searchParams.set('pool_mode', 'transaction');
  return direct.toString();
}
