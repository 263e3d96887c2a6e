/**
 * Child processes that must not outlive this one: each is killed when this
 * process exits, also when it is interrupted (SIGINT, SIGTERM, SIGHUP, as a
 * test runner or a shell does). Used by the tests and the bench harnesses.
 */
import type { ChildProcess } from 'node:child_process';
import { isAlive } from '../server/ops/data-dir.js';

const running = new Set<ChildProcess>();
/** Process groups that children lead (spawned `detached`): what is left of each goes with it. */
const groups = new Set<number>();
let guarded = false;

function killAll(): void {
  const pids: number[] = [];
  for (const child of running) {
    child.kill('SIGKILL');
    if (child.pid !== undefined) pids.push(child.pid);
  }
  for (const pid of groups) killGroup(pid, 'SIGKILL');
  running.clear();
  groups.clear();
  waitGone(pids);
}

/** Sends `signal` to every process of the group `pid` leads, if any is left. */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // None left.
  }
}

/**
 * Waits, synchronously (for 'exit' handlers), until each of `pids` has
 * stopped running: a killed process takes a moment to free its memory and
 * die, and nothing of this process's should outlive it (a zombie, dead but
 * not yet reaped, counts as gone). At most 5 s.
 */
export function waitGone(pids: readonly number[]): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 5000;
  for (const pid of pids) while (isAlive(pid) && Date.now() < until) Atomics.wait(pause, 0, 0, 1);
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
  for (const [signal, number] of [
    ['SIGINT', 2],
    ['SIGTERM', 15],
    ['SIGHUP', 1],
  ] as const) {
    process.once(signal, () => process.exit(128 + number));
  }
}

/**
 * Tracks `child` until it exits; with `group` (it was spawned `detached`,
 * leading a process group of its own), its group until this process
 * exits: a shell's pipeline may outlive the shell.
 */
export function track(child: ChildProcess, group = false): void {
  if (!guarded) {
    guarded = true;
    process.once('exit', killAll);
    exitOnInterrupt();
  }
  running.add(child);
  if (group && child.pid !== undefined) groups.add(child.pid);
  child.once('exit', () => running.delete(child));
  child.once('error', () => running.delete(child));
}

/** Stops tracking the group `pid` leads: it has been killed. */
export function untrackGroup(pid: number): void {
  groups.delete(pid);
}
