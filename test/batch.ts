/**
 * `npm test` runs the test files in a few batches, one process each
 * (test/batches/): a test process costs about 0.7 s of CPU to start (node,
 * tsx, the modules), which for fifty files was a third of the suite's time
 * on two cores. Every test/*.test.ts file belongs to exactly one batch, by
 * a greedy split on its cost; a new file joins without a change here.
 * Each file still runs alone: `node --import tsx --test test/NAME.test.ts`.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TEST_DIR = fileURLToPath(new URL('.', import.meta.url));

/** Seconds a file took alone on the 2-core machine (wall time: some mostly wait, on PostgreSQL or timers); others count DEFAULT_COST. */
const COSTS: Record<string, number> = {
  'cli-bin.test.ts': 9,
  'docs-examples.test.ts': 10,
  'cli-examples.test.ts': 7,
  'postgres-instances.test.ts': 14,
  'browser.test.ts': 15,
  'console.test.ts': 60,
  'property.test.ts': 6,
  'cookie-interop.test.ts': 6,
  'server-cli.test.ts': 6,
  'accounts.test.ts': 5,
  'journal-crash.test.ts': 5,
  'journal-failure.test.ts': 5,
  'put-rules.test.ts': 4,
  'concurrency.test.ts': 4,
  'journal-recovery.test.ts': 4,
  'model.test.ts': 4,
  'timeouts.test.ts': 6,
  'store-suite.test.ts': 3,
  'cli-scripts.test.ts': 3,
  'cli-completion.test.ts': 2,
  'readme-examples.test.ts': 4,
  'changes.test.ts': 4,
  'cli-watch.test.ts': 5,
  'cli-output.test.ts': 2,
  'cli-export.test.ts': 2,
  'cli-tokens.test.ts': 2,
  'backup.test.ts': 2.5,
  'deploy.test.ts': 2.5,
  'tls.test.ts': 2,
  'curl-walkthrough.test.ts': 2,
};
const DEFAULT_COST = 1.5;
/** Files that share a process: the PostgreSQL ones start one throwaway cluster per process. */
const TOGETHER: readonly (readonly string[])[] = [
  ['store-suite.test.ts', 'postgres-instances.test.ts', 'changes.test.ts'],
];

/** The test files of batch `index` (1-based) of `count`. */
function batchFiles(index: number, count: number): string[] {
  const files = readdirSync(TEST_DIR)
    .filter((name) => name.endsWith('.test.ts'))
    .sort();
  const units = files.filter((f) => !TOGETHER.some((g) => g.includes(f))).map((f) => [f]);
  for (const group of TOGETHER) units.push(group.filter((f) => files.includes(f)));
  const cost = (unit: readonly string[]) => unit.reduce((sum, f) => sum + (COSTS[f] ?? DEFAULT_COST), 0);
  const loads = Array.from({ length: count }, () => ({ cost: 0, files: [] as string[] }));
  for (const unit of units.sort((a, b) => cost(b) - cost(a) || (a[0]! < b[0]! ? -1 : 1))) {
    const lightest = loads.reduce((min, load) => (load.cost < min.cost ? load : min));
    lightest.cost += cost(unit);
    lightest.files.push(...unit);
  }
  // The heaviest first: the runner starts batch-1 and batch-2 together, and
  // a long batch that starts last would finish alone.
  loads.sort((a, b) => b.cost - a.cost);
  return loads[index - 1]!.files;
}

/** Imports the files of batch `index` of `count`: their tests run in this process, one file after another. */
export async function runBatch(index: number, count: number): Promise<void> {
  for (const name of batchFiles(index, count)) await import(pathToFileURL(`${TEST_DIR}${name}`).href);
}
