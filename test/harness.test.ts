/**
 * The test harness keeps its promises: a test process that is interrupted
 * kills the children it started and removes its temp folders, and a child
 * left running at the end of its test is killed.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isAlive } from '../server/ops/data-dir.js';
import { spawnChild } from './processes.js';

const FIXTURE = join(fileURLToPath(new URL('.', import.meta.url)), 'fixtures', 'interrupted.ts');

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(`harness: a test process interrupted by ${signal} kills the children it started and removes its temp folders`, async (t) => {
    const runner = spawnChild(t, process.execPath, ['--import', 'tsx', FIXTURE]);
    const line = await runner.waitForLine(/^\{.*\}$/);
    const { dir, pid } = JSON.parse(line[0]) as { dir: string; pid: number };
    assert.ok(existsSync(dir) && isAlive(pid), 'the folder and the child exist before the signal');
    runner.kill(signal);
    const exit = await runner.exited;
    assert.equal(exit.code, signal === 'SIGTERM' ? 143 : 130, `exit ${JSON.stringify(exit)}: ${runner.stderr()}`);
    assert.equal(existsSync(dir), false, `${dir} was left behind`);
    assert.equal(isAlive(pid), false, `child ${pid} was left running`);
  });
}

let leftPid = 0;
test('harness: a child still running when its test ends is killed then (1/2: start one and end)', (t) => {
  leftPid = spawnChild(t, process.execPath, ['-e', 'setInterval(() => {}, 1000)']).pid;
  assert.ok(isAlive(leftPid));
});

test('harness: a child still running when its test ends is killed then (2/2: it is gone)', () => {
  assert.ok(leftPid > 0, 'the first half ran');
  assert.equal(isAlive(leftPid), false, `child ${leftPid} outlived its test`);
});
