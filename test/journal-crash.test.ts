/**
 * Crash tests of the durable journal (issue 3, "Tests"): the real server as
 * a child process, 64 concurrent clients, `kill -9` at random moments, then a
 * restart on the same data directory checked against everything the clients
 * were told (test/crash-harness.ts lists the checks). bin/ runs dist/: it
 * is rebuilt first when older than the sources.
 */
import assert from 'node:assert/strict';
import { before, test, type TestContext } from 'node:test';
import { runCrashCycles, type CrashSummary } from './crash-harness.js';
import { buildIfStale } from './helpers.js';

let skipReason: string | undefined;

before(() => {
  skipReason = buildIfStale();
  if (skipReason !== undefined) process.stdout.write(`# journal-crash: ${skipReason}\n`);
});

function report(t: TestContext, s: CrashSummary): void {
  const restart = [...s.restartMs].sort((a, b) => a - b);
  t.diagnostic(
    `${s.cycles} cycles (seed ${s.seed}): ${s.acknowledged} acknowledged of ${s.sent} sent, ${s.inFlight} in flight at the kills, ` +
      `${s.checks} checks; restart median ${restart[restart.length >> 1]?.toFixed(0)} ms; dropped ${s.droppedBytes} bytes in ${s.drops} restarts; ` +
      `${s.compactions} compactions, ${s.killsOnCompaction} kills set off by one, ${s.compactionsUnfinishedAtKill} found one unfinished, ${s.leftoversRemoved} leftovers removed`,
  );
}

function assertIntact(s: CrashSummary, cycles: number): void {
  assert.deepEqual(s.violations, [], `seed ${s.seed}, data directory kept in ${s.dataDir}`);
  assert.equal(s.cycles, cycles);
  // Guards against a run that checked nothing: writes were acknowledged, and some were cut off by the kills.
  assert.ok(s.acknowledgedWrites > 0, 'no write was acknowledged');
  assert.ok(s.inFlight > 0, 'no request was in flight at any kill');
}

// Four cycles of each kind here; `npm run bench:crash` runs as many as asked (a soak).
test('crash: after each of 4 kill -9 under 64 writing clients, every acknowledged write, id, reservation, Idempotency-Key and DELETE survives the restart', async (t) => {
  if (skipReason !== undefined) return t.skip(skipReason);
  const summary = await runCrashCycles({ cycles: 4 });
  report(t, summary);
  assertIntact(summary, 4);
});

test('compaction: killed during compaction in each of 4 cycles (--compaction-floor 4096), every restart finds the whole state and a consistent set of files, no temp file', async (t) => {
  if (skipReason !== undefined) return t.skip(skipReason);
  // A small live set, so the journal outgrows twice the live data within a few hundred writes.
  const summary = await runCrashCycles({
    cycles: 4,
    serverArgs: ['--compaction-floor', '4096'],
    killOnCompaction: 1,
    targetUsers: 40,
  });
  report(t, summary);
  assertIntact(summary, 4);
  // The kills did land on compactions: the server created or renamed a journal or snapshot, and died a few ms later.
  assert.ok(summary.killsOnCompaction > 0, 'no kill was set off by a compaction');
});
