/**
 * Child processes that must not outlive this one: each is killed when this
 * process exits, also when it is interrupted (SIGINT, SIGTERM, SIGHUP, as a
 * test runner or a shell does). Used by the tests and the bench harnesses.
 */
import type { ChildProcess } from 'node:child_process';

const running = new Set<ChildProcess>();
let guarded = false;

function killAll(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

/** Tracks `child` until it exits. */
export function track(child: ChildProcess): void {
  if (!guarded) {
    guarded = true;
    process.once('exit', killAll);
    // Exit as a process killed by the signal would (128 + its number), but
    // through process.exit, so every 'exit' handler runs: this one, and the
    // tests' removal of their temp folders.
    for (const [signal, number] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]] as const) {
      process.once(signal, () => process.exit(128 + number));
    }
  }
  running.add(child);
  child.once('exit', () => running.delete(child));
  child.once('error', () => running.delete(child));
}
