/**
 * A test process of test/run.ts: takes the next file of the queue and runs
 * its tests as a suite named after it, then the next, until none is left.
 * A file's hooks belong to its suite, and the suite ends when its last
 * test has, so one file's tests never overlap another's.
 */
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The one bound on the tests: a file whose tests take ten minutes (one hangs) fails instead of holding CI. */
const TIMEOUT_MS = 600_000;

const queue = process.env.USERS_TEST_QUEUE;
if (queue === undefined) throw new Error('test/run-worker.ts runs under test/run.ts (npm test)');
const files = JSON.parse(readFileSync(join(queue, 'files.json'), 'utf8')) as string[];

/** True for the one process that takes file `index`: creating its claim fails for every other. */
function claim(index: number): boolean {
  try {
    closeSync(openSync(join(queue!, `taken-${index}`), 'wx'));
    return true;
  } catch {
    return false;
  }
}

for (const [index, file] of files.entries()) {
  if (!claim(index)) continue;
  await describe(relative(ROOT, file), { timeout: TIMEOUT_MS }, async () => {
    await import(pathToFileURL(file).href);
  });
}
