/**
 * The long crash run: `node --import tsx bench/crash.ts [cycles] [--compaction-floor N]
 * [--kill-on-compaction SHARE] [--seed N] [--keep]` (needs `npm run build`).
 * Each cycle: 64 clients write, the server is killed with SIGKILL 50-400 ms
 * into the load, restarted on the same directory and checked against every
 * acknowledged write (test/crash-harness.ts). Prints a line per cycle and
 * the totals; exits 1 on any violation, leaving the data directory for a
 * look.
 */
import { parseArgs } from 'node:util';
import { quantile, runCrashCycles } from '../test/crash-harness.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'compaction-floor': { type: 'string' },
    'kill-on-compaction': { type: 'string', default: '0' },
    seed: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const cycles = Number(positionals[0] ?? 200);
if (!Number.isSafeInteger(cycles) || cycles < 1) {
  process.stderr.write(
    'usage: bench/crash.ts [cycles] [--compaction-floor N] [--kill-on-compaction 0..1] [--seed N] [--keep]\n',
  );
  process.exit(2);
}
const serverArgs = values['compaction-floor'] === undefined ? [] : ['--compaction-floor', values['compaction-floor']];

const ms = (n: number) => `${n.toFixed(0)} ms`;
process.stdout.write(
  `crash run: ${cycles} cycles, 64 clients, kill -9 50-400 ms into the load${serverArgs.length ? `, ${serverArgs.join(' ')}` : ''}\n`,
);
const summary = await runCrashCycles({
  cycles,
  serverArgs,
  killOnCompaction: Number(values['kill-on-compaction']),
  ...(values.seed !== undefined && { seed: Number(values.seed) }),
  keepDataDir: values.keep,
  onCycle: (c) =>
    process.stdout.write(
      `cycle ${String(c.cycle).padStart(3)}: ${String(c.acknowledged).padStart(5)} acknowledged of ${String(c.sent).padStart(5)} sent, ` +
        `${String(c.inFlight).padStart(2)} in flight at the kill (${c.killTrigger} after ${ms(c.killAfterMs)}), ` +
        `${c.compactions} compactions${c.compactionUnfinished ? ' (one unfinished at the kill)' : ''}, restart ${ms(c.restartMs)}, ` +
        `dropped ${c.droppedBytes} B${c.leftoversRemoved ? `, removed ${c.leftoversRemoved} leftovers` : ''}, ${c.users} users, ${c.checks} checks` +
        (c.violations ? `, ${c.violations} VIOLATIONS` : '') +
        '\n',
    ),
});

const total = summary.sent;
const lines = [
  '',
  `cycles:                 ${summary.cycles} (seed ${summary.seed}, ${(summary.elapsedMs / 1000).toFixed(1)} s)`,
  `requests sent:          ${total}`,
  `acknowledged:           ${summary.acknowledged} (${summary.acknowledgedWrites} writes, the rest reservations)`,
  `in flight at the kills: ${summary.inFlight}`,
  `restart to listening:   median ${ms(quantile(summary.restartMs, 0.5))}, p95 ${ms(quantile(summary.restartMs, 0.95))}, max ${ms(Math.max(...summary.restartMs))}`,
  `dropped from the log:   ${summary.droppedBytes} bytes in ${summary.drops} restarts`,
  `compactions:            ${summary.compactions}; ${summary.compactionsUnfinishedAtKill} kills found one unfinished, ${summary.killsOnCompaction} kills set off by one; ${summary.leftoversRemoved} leftover files removed at start`,
  `checks:                 ${summary.checks}`,
  `violations:             ${summary.violations.length}`,
  ...summary.violations.map((v) => `  ${v}`),
];
if (summary.violations.length > 0) lines.push(`data directory kept: ${summary.dataDir}`);
process.stdout.write(lines.join('\n') + '\n');
process.exitCode = summary.violations.length > 0 ? 1 : 0;
