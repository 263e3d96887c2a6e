import type { Change } from '../store.js';

/**
 * The changes of users a memory or journal store keeps for the feed of
 * changes: every put, delete and move in commit order, numbered 1, 2, 3,
 * ... with no gap, the oldest dropped once older than the retention.
 * Sequence numbers are never reused: `lastSeq` and `trimmedThrough`
 * survive a restart (the journal replays its commits, a snapshot writes
 * both and the changes it keeps).
 */
export class ChangeLog {
  /** The kept changes, oldest first, from `start` on (the array is cut from the front only now and then). */
  private entries: Change[] = [];
  private start = 0;
  /** The newest change's number; 0 before the first. */
  lastSeq = 0;
  /** The newest change's number that retention dropped; 0 when none was. */
  trimmedThrough = 0;

  /** Adds a change committed at `at` (ms since the epoch) under the next number. */
  record(change: Omit<Change, 'seq'>): void {
    const seq = ++this.lastSeq;
    const { op, id, from, json, at } = change;
    // Literals, not a spread of `change`: a spread costs about 1% of a durable PUT.
    this.entries.push(
      from !== undefined
        ? { seq, op, id, from, json, at }
        : json !== undefined
          ? { seq, op, id, json, at }
          : { seq, op, id, at },
    );
  }

  /** Changes numbered above `after`, at most `limit`, oldest first; from the oldest kept when `after` is older. */
  after(after: number, limit: number): Change[] {
    const from = this.start + Math.max(0, after - this.trimmedThrough);
    return this.entries.slice(from, Math.min(this.entries.length, from + limit));
  }

  /**
   * The number of the newest change committed before `before` (ms since the epoch), or `trimmedThrough` when none is
   * kept.
   */
  committedBefore(before: number): number {
    let i = this.start;
    while (i < this.entries.length && this.entries[i]!.at < before) i++;
    return i === this.start ? this.trimmedThrough : this.entries[i - 1]!.seq;
  }

  /** Drops the changes numbered up to `seq`. */
  trimThrough(seq: number): void {
    if (seq <= this.trimmedThrough) return;
    this.start = Math.min(this.entries.length, this.start + (seq - this.trimmedThrough));
    this.trimmedThrough = seq;
    // Cut the dropped slots away once they are most of the array.
    if (this.start > 1024 && this.start * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.start);
      this.start = 0;
    }
  }

  /** The kept changes, oldest first (a snapshot's copy). */
  kept(): Change[] {
    return this.entries.slice(this.start);
  }

  get size(): number {
    return this.entries.length - this.start;
  }

  /** Snapshot loading: the numbers, before the kept changes. */
  restoreNumbers(lastSeq: number, trimmedThrough: number): void {
    this.entries = [];
    this.start = 0;
    this.lastSeq = lastSeq;
    this.trimmedThrough = trimmedThrough;
  }

  /** Snapshot loading: a kept change, in order after the numbers (its number must follow the last). */
  restore(change: Change): boolean {
    const expected = this.trimmedThrough + this.size + 1;
    if (change.seq !== expected || change.seq > this.lastSeq) return false;
    this.entries.push(change);
    return true;
  }
}
