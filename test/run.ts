/**
 * `npm test`: the test files (all of test/*.test.ts, or those named) run in
 * a few test processes, each taking the next file from a shared queue once
 * it has finished one (test/run-worker.ts). Starting node, tsx and the
 * modules costs a test process about half a second of CPU, several times
 * the time of most files' tests; a few processes that each run many files
 * pay it a few times, and the queue keeps them all busy to the end.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';

const TEST_DIR = fileURLToPath(new URL('.', import.meta.url));
const WORKER = join(TEST_DIR, 'run-worker.ts');

const named = process.argv.slice(2).map((file) => resolve(file));
const files =
  named.length > 0
    ? named
    : readdirSync(TEST_DIR)
        .filter((name) => name.endsWith('.test.ts'))
        .sort()
        .map((name) => join(TEST_DIR, name));
const queue = mkdtempSync(join(tmpdir(), 'users-test-queue-'));
process.once('exit', () => rmSync(queue, { recursive: true, force: true }));
writeFileSync(join(queue, 'files.json'), JSON.stringify(files));
// USERS_*: the spawn helpers leave it out of every child a test starts.
process.env.USERS_TEST_QUEUE = queue;
// Two per core: while one waits on PostgreSQL, a timer or a child process, the other keeps the core busy.
const workers = Math.min(files.length, 2 * availableParallelism());
const stream = run({ files: Array.from({ length: workers }, () => WORKER), concurrency: workers });
stream.on('test:fail', (data: { todo?: string | boolean }) => {
  if (data.todo === undefined || data.todo === false) process.exitCode = 1;
});
stream.compose(new spec()).pipe(process.stdout);
