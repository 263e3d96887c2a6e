/**
 * The PostgreSQL pool replaced by a fresh one (driver.ts `recycling`): the
 * old pool ends once what it had lent is back, so its connections close
 * and nothing of it keeps the process alive. Without PostgreSQL binaries
 * the test skips and says why.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { connect, type Sql } from '../server/store/postgres/driver.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

const skip = postgresSkipReason();

/** Waits until no session of the database has the backend `pid`. */
async function sessionGone(admin: Sql, pid: number): Promise<void> {
  for (;;) {
    const [row] = await admin`select count(*)::int as n from pg_stat_activity where pid = ${pid}`;
    if (row!.n === 0) return;
    await delay(20);
  }
}

async function backendPid(sql: Sql): Promise<number> {
  const [row] = await sql`select pg_backend_pid() as pid`;
  return row!.pid as number;
}

test('a replaced pool closes a connection that was reserved when it began to end, once it is released', async (t) => {
  if (skip !== undefined) return t.skip(skip);
  const url = await testDatabase(t);
  // The pool is replaced at the second call and the old one begins to end on the next turn of the timers, with
  // 2 x 300 s to finish: a connection it kept open would hold the test that long.
  const sql = await connect(url, { recycleAfter: 1, retireDelayMs: 0, timeoutSeconds: 300 });
  const admin = await connect(url, { max: 1 });
  t.after(() => Promise.all([sql.end({ timeout: 1 }), admin.end({ timeout: 1 })]));
  const reserved = await sql.reserve();
  const pid = await backendPid(reserved);
  // The second call replaces the pool.
  await sql`select 1`;
  // The timers run in order: after this one, the old pool's retirement has begun.
  await delay(0);
  reserved.release();
  await sessionGone(admin, pid);
  assert.equal((await sql`select 1 as one`)[0]!.one, 1);
});
