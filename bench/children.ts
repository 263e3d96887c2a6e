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

let exitsOnInterrupt = false;

/**
 * On SIGINT, SIGTERM or SIGHUP, exits as a process killed by the signal
 * would (128 + its number), but through process.exit, so that every 'exit'
 * handler runs: the killing of children, the tests' removal of their temp
 * folders, the stop of their PostgreSQL cluster. (Killed by the signal
 * itself, node runs none of them.)
 */
export function exitOnInterrupt(): void {
  if (exitsOnInterrupt) return;
  exitsOnInterrupt = true;
  for (const [signal, number] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]] as const) {
    process.once(signal, () => process.exit(128 + number));
  }
}

/** Tracks `child` until it exits. */
export function track(child: ChildProcess): void {
  if (!guarded) {
    guarded = true;
    process.once('exit', killAll);
    exitOnInterrupt();
  }
  running.add(child);
  child.once('exit', () => running.delete(child));
  child.once('error', () => running.delete(child));
}
