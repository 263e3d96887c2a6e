/**
 * The test harness keeps its promises: a test process that is interrupted
 * kills the children it started, stops its PostgreSQL cluster and removes
 * its temp folders, and a child left running at the end of its test is
 * killed.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isAlive } from '../server/ops/data-dir.js';
import { postgresSkipReason } from './postgres.js';
import { spawnChild } from './processes.js';

const FIXTURE = join(fileURLToPath(new URL('.', import.meta.url)), 'fixtures', 'interrupted.ts');

/**
 * Runs the fixture with `args`, interrupts it with `signal` once it has made its things, and checks that none is left.
 */
async function interrupt(t: TestContext, signal: 'SIGTERM' | 'SIGINT', args: string[]): Promise<void> {
  const runner = spawnChild(t, process.execPath, ['--import', 'tsx', FIXTURE, ...args]);
  const line = await runner.waitForLine(/^\{.*\}$/);
  const made = JSON.parse(line[0]) as { dir: string; pid?: number; clusterDir?: string; clusterPid?: number };
  const folders = [made.dir, ...(made.clusterDir === undefined ? [] : [made.clusterDir])];
  const pids = [made.pid, made.clusterPid].filter((pid) => pid !== undefined);
  assert.ok(
    folders.every((dir) => existsSync(dir)) && pids.every((pid) => isAlive(pid)),
    'what it made exists before the signal',
  );
  runner.kill(signal);
  const exit = await runner.exited;
  assert.equal(exit.code, signal === 'SIGTERM' ? 143 : 130, `exit ${JSON.stringify(exit)}: ${runner.stderr()}`);
  for (const dir of folders) assert.equal(existsSync(dir), false, `${dir} was left behind`);
  for (const pid of pids) assert.equal(isAlive(pid), false, `process ${pid} was left running`);
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`harness: a test process interrupted by ${signal} kills the children it started and removes its temp folders`, (t) =>
    interrupt(t, signal, ['--child']));
}

// No child here, so the exit on an interrupt must come from the helpers and the cluster's start,
// not from the tracking of children. Without PostgreSQL, the temp folder alone is checked.
test('harness: a test process that started no child but its PostgreSQL cluster stops it and removes its folders when interrupted', (t) => {
  const skip = postgresSkipReason();
  if (skip !== undefined) t.diagnostic(`the cluster is not checked: ${skip}`);
  return interrupt(t, 'SIGTERM', skip === undefined ? ['--postgres'] : []);
});

let leftPid = 0;
test('harness: a child still running when its test ends is killed then (1/2: start one and end)', (t) => {
  leftPid = spawnChild(t, process.execPath, ['-e', 'setInterval(() => {}, 1000)']).pid;
  assert.ok(isAlive(leftPid));
});

test('harness: a child still running when its test ends is killed then (2/2: it is gone)', () => {
  assert.ok(leftPid > 0, 'the first half ran');
  assert.equal(isAlive(leftPid), false, `child ${leftPid} outlived its test`);
});
