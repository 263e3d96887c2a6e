/**
 * `npm test`: the test files (all of test/*.test.ts, or those named) run in
 * a few test processes, each taking the next file from a shared queue once
 * it has finished one (test/run-worker.ts). Starting node, tsx and the
 * modules costs a test process about half a second of CPU, several times
 * the time of most files' tests; a few processes that each run many files
 * pay it a few times, and the queue keeps them all busy to the end.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TEST_DIR = join(ROOT, 'test');
const WORKER = join(TEST_DIR, 'run-worker.ts');
/** How long each file took in the last run, in ms: where the next run's queue starts. */
const DURATIONS = join(ROOT, 'node_modules', '.cache', 'users-server', 'test-durations.json');

/** The durations the last run wrote, or none. */
function lastDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * The longest files first, as the last run timed them, and before them the
 * files it did not run (new ones): a long file taken last would finish
 * alone while the other processes have nothing left to do.
 */
function queueOrder(files: string[], durations: Record<string, number>): string[] {
  const took = (file: string) => durations[relative(ROOT, file)] ?? Infinity;
  return [...files].sort((a, b) => took(b) - took(a) || (a < b ? -1 : 1));
}

const named = process.argv.slice(2).map((file) => resolve(file));
const files =
  named.length > 0
    ? named
    : readdirSync(TEST_DIR)
        .filter((name) => name.endsWith('.test.ts'))
        .map((name) => join(TEST_DIR, name));
const durations = lastDurations();
const queue = mkdtempSync(join(tmpdir(), 'users-test-queue-'));
process.once('exit', () => rmSync(queue, { recursive: true, force: true }));
writeFileSync(join(queue, 'files.json'), JSON.stringify(queueOrder(files, durations)));
// USERS_*: the spawn helpers leave it out of every child a test starts.
process.env.USERS_TEST_QUEUE = queue;
// Two per core: while one waits on PostgreSQL, a timer or a child process, the other keeps the core busy.
const workers = Math.min(files.length, 2 * availableParallelism());
const stream = run({ files: Array.from({ length: workers }, () => WORKER), concurrency: workers });

interface TestEvent {
  name: string;
  nesting: number;
  todo?: string | boolean;
  details: { duration_ms: number };
}

stream.on('test:fail', (data: TestEvent) => {
  if (data.todo === undefined || data.todo === false) process.exitCode = 1;
});
// Each file is a suite at the top of its process, named by its path.
stream.on('test:pass', (data: TestEvent) => {
  if (data.nesting === 0 && data.name.endsWith('.test.ts')) durations[data.name] = data.details.duration_ms;
});
stream.on('end', () => {
  // A whole run keeps only the files that are there now: a renamed or split file's old entry goes.
  if (named.length === 0)
    for (const file of Object.keys(durations)) if (!files.includes(join(ROOT, file))) delete durations[file];
  mkdirSync(dirname(DURATIONS), { recursive: true });
  writeFileSync(DURATIONS, JSON.stringify(durations, null, 2) + '\n');
});
stream.compose(new spec()).pipe(process.stdout);
