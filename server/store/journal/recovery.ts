/**
 * Reading the data directory back into a StoreState at start-up.
 *
 * The directory holds generations: `snapshot-G` is the whole state at the
 * moment `journal-G` was started, and `journal-G` holds every commit after
 * it. Compaction starts `journal-(G+1)` first and writes `snapshot-(G+1)`
 * afterwards, so the state is always the newest snapshot plus every journal
 * from its generation on (docs/storage.md). Start-up is synchronous: nothing
 * is served before the state is whole.
 */
import {
  closeSync,
  fstatSync,
  ftruncateSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../../errors.js';
import {
  applyPayload,
  checkHeader,
  FileKind,
  FRAME_BYTES,
  HEADER_BYTES,
  recordAt,
  refuseNewerFormat,
} from './codec.js';
import { StoreState } from '../memory/state.js';
import { withFile, withRecordAt } from './records-print.js';

const NAME = /^(journal|snapshot)-(\d{8})$/;
const READ_CHUNK = 8 * 1024 * 1024;

export function journalName(generation: number): string {
  return `journal-${String(generation).padStart(8, '0')}`;
}

export function snapshotName(generation: number): string {
  return `snapshot-${String(generation).padStart(8, '0')}`;
}

interface DataFiles {
  journals: number[];
  snapshots: number[];
  /** Leftovers of an interrupted snapshot write. */
  temps: string[];
}

export function listDataFiles(dir: string): DataFiles {
  const files: DataFiles = { journals: [], snapshots: [], temps: [] };
  for (const name of readdirSync(dir)) {
    const match = NAME.exec(name);
    if (match) (match[1] === 'journal' ? files.journals : files.snapshots).push(Number(match[2]));
    else if (/^snapshot-\d{8}\.tmp$/.test(name)) files.temps.push(name);
  }
  files.journals.sort((a, b) => a - b);
  files.snapshots.sort((a, b) => a - b);
  return files;
}

/** Damage found in a file: where the valid records stop, and whether valid records follow. */
export interface Damage {
  file: string;
  offset: number;
  reason: string;
  /** Bytes from `offset` to the end of the file. */
  bytes: number;
  /** Offset of the first valid record after the damage, if there is one. */
  validAfter: number | undefined;
  /** Damage no crash can cause (a foreign header, a record that verifies but does not parse): never truncated. */
  foreign?: true;
}

/** Real corruption: the server refuses to start and names the repair command. */
function corruptionError(damage: Damage, dir: string): DataError {
  return new DataError(
    `${damage.file} is damaged at byte offset ${damage.offset} (${damage.reason})` +
      (damage.validAfter !== undefined ? `, and valid records follow at offset ${damage.validAfter}` : '') +
      `; nothing was changed. Run: users-server repair --data ${dir}`,
  );
}

interface FileScan {
  /** End of the last valid record: where appending resumes. */
  end: number;
  size: number;
  damage: Damage | undefined;
  /** The user count of a snapshot's end mark, if it was reached. */
  endMark: number | undefined;
}

/**
 * Replays one file's records into `state`, reading it in chunks. Stops at the
 * first record that does not verify and reports it, with the offset of the
 * next valid record, if any (which tells a torn tail from corruption).
 */
function replayFile(
  path: string,
  name: string,
  kind: FileKind,
  generation: number,
  state: StoreState,
  touched?: Touched,
): FileScan {
  const fd = openSync(path, 'r');
  try {
    const { size, mtimeMs } = fstatSync(fd);
    // A journal's commits are changes of the feed, each at most as late as the file's last write.
    const changedAt = kind === FileKind.Journal ? mtimeMs : undefined;
    const header = Buffer.alloc(HEADER_BYTES);
    const headerBytes = readSync(fd, header, 0, HEADER_BYTES, 0);
    if (headerBytes < HEADER_BYTES) {
      const damage = {
        file: name,
        offset: 0,
        reason: 'the file header is incomplete',
        bytes: size,
        validAfter: undefined,
      };
      return { end: 0, size, damage, endMark: undefined };
    }
    refuseNewerFormat(header, name);
    const problem = checkHeader(header, kind, generation);
    if (problem !== undefined) {
      // A header that is not ours is never a torn write: refuse.
      return {
        end: 0,
        size,
        damage: { file: name, offset: 0, reason: problem, bytes: size, validAfter: undefined, foreign: true },
        endMark: undefined,
      };
    }
    let base = HEADER_BYTES; // file offset of buf[0]
    let buf = Buffer.alloc(0);
    let at = 0;
    let endMark: number | undefined;
    for (;;) {
      const length = recordAt(buf, at);
      if (length > 0) {
        if (touched !== undefined) noteRecord(touched, state, buf, base, at, length);
        try {
          const mark = applyPayload(state, buf, at + FRAME_BYTES, at + length, kind, changedAt);
          if (mark !== undefined) endMark = mark;
        } catch (error) {
          if (!(error instanceof DataError)) throw error;
          const damage = {
            file: name,
            offset: base + at,
            reason: `a record that verifies but does not parse: ${error.message}`,
            bytes: size - base - at,
            validAfter: undefined,
            foreign: true,
          } as const;
          return { end: base + at, size, damage, endMark };
        }
        at += length;
        continue;
      }
      // Not a whole record at `at`: read more, unless the file is exhausted.
      if (base + buf.length >= size) break;
      const rest = buf.subarray(at);
      const want = Math.max(READ_CHUNK, wantedLength(rest));
      const next = Buffer.allocUnsafe(rest.length + Math.min(want, size - base - buf.length));
      rest.copy(next, 0);
      const read = readFully(fd, next, rest.length, base + buf.length);
      base += at;
      buf = next.subarray(0, rest.length + read);
      at = 0;
    }
    const end = base + at;
    if (end === size) return { end, size, damage: undefined, endMark };
    const damaged = buf.subarray(at);
    if (isZero(damaged))
      return {
        end,
        size,
        damage: { file: name, offset: end, reason: ZERO_TAIL, bytes: size - end, validAfter: undefined },
        endMark,
      };
    const next = findRecord(damaged);
    return {
      end,
      size,
      damage: {
        file: name,
        offset: end,
        reason: 'a record that is incomplete or fails its checksum',
        bytes: size - end,
        validAfter: next === undefined ? undefined : end + next,
      },
      endMark,
    };
  } finally {
    closeSync(fd);
  }
}

/**
 * The reason given for zeros after the last record: a journal's preallocated space, or a write that never got past it.
 */
const ZERO_TAIL = 'zero bytes';

function isZero(buf: Buffer): boolean {
  for (let i = 0; i < buf.length; i++) if (buf[i] !== 0) return false;
  return true;
}

/** How many bytes the record at the start of `buf` claims to need, so a large record is read whole. */
function wantedLength(buf: Buffer): number {
  return buf.length >= 4 ? buf.readUInt32LE(0) + FRAME_BYTES : 0;
}

function readFully(fd: number, buf: Buffer, offset: number, position: number): number {
  let total = 0;
  while (offset + total < buf.length) {
    const n = readSync(fd, buf, offset + total, buf.length - offset - total, position + total);
    if (n === 0) break;
    total += n;
  }
  return total;
}

/** Offset of the first valid record in `buf` after its first byte. */
function findRecord(buf: Buffer): number | undefined {
  for (let i = 1; i + FRAME_BYTES <= buf.length; i++) if (recordAt(buf, i) > 0) return i;
  return undefined;
}

/**
 * Of a file replayed with a point in view: the users written by its
 * records from offset `from` on, and the print of its records before it
 * (records-print.ts), once its replay is done.
 */
interface Touched {
  from: number;
  ids: Set<number>;
  print: number;
  /** Whether a record ends at `from`, or `from` is where the records start. */
  boundary: boolean;
}

/** A point in the journals: the end of the records of journal `generation` that were there then. */
export interface JournalPoint {
  generation: number;
  end: number;
}

export interface Recovered {
  state: StoreState;
  /**
   * With `since`: the users written after it and the print of the files up
   * to it (records-print.ts), or undefined when the files no longer run
   * through it.
   */
  writtenSince: { ids: Set<number>; print: number } | undefined;
  /**
   * The journal to append to, where its valid records end, and the bytes of
   * the journals before it that no snapshot covers yet (an interrupted
   * compaction); undefined on a fresh directory.
   */
  journal: { generation: number; end: number; earlierBytes: number } | undefined;
  /** Lines for the log: what was dropped or cleaned up. */
  notes: string[];
  /** Salvage mode only: the damage where recovery stopped. */
  damage: Damage | undefined;
}

/**
 * Loads the newest snapshot and replays the journals after it. A damaged
 * tail of the last journal (a write that never finished, so was never
 * acknowledged) is truncated; damage anywhere else throws a DataError.
 * In `salvage` mode (repair) recovery stops at the first damage instead and
 * returns the state up to it, changing no file.
 */
export function recover(dir: string, options: { salvage?: boolean; since?: JournalPoint } = {}): Recovered {
  const files = listDataFiles(dir);
  const state = new StoreState();
  const notes: string[] = [];
  const salvage = options.salvage === true;
  const base = files.snapshots.at(-1) ?? 0;
  const journals = files.journals.filter((g) => g >= base);
  const fail = (damage: Damage): Recovered => {
    if (!salvage) throw corruptionError(damage, dir);
    return { state, writtenSince: undefined, journal: undefined, notes, damage };
  };
  const since = options.since;
  const ids = new Set<number>();
  // The point must lie in a journal replayed whole after the snapshot, within its records.
  let through = since !== undefined && since.generation >= base && journals.includes(since.generation);
  let print = 0;
  const noted = (from: number): Touched | undefined =>
    through ? { from, ids, print: 0, boundary: from === HEADER_BYTES } : undefined;

  if (base > 0) {
    const name = snapshotName(base);
    const snapshot = noted(Infinity);
    const scan = replayFile(join(dir, name), name, FileKind.Snapshot, base, state, snapshot);
    if (snapshot !== undefined) print = withFile(print, name, snapshot.print);
    if (scan.damage) return fail(scan.damage);
    if (scan.endMark === undefined)
      return fail({
        file: name,
        offset: scan.end,
        reason: 'the snapshot has no end mark',
        bytes: 0,
        validAfter: undefined,
      });
    if (scan.endMark !== state.users.size)
      return fail({
        file: name,
        offset: scan.end,
        reason: `the end mark counts ${scan.endMark} users, the snapshot holds ${state.users.size}`,
        bytes: 0,
        validAfter: undefined,
      });
  }
  const gap = missingJournal(base, journals);
  if (gap !== undefined) return fail(gap);

  let journal: Recovered['journal'];
  let earlierBytes = 0;
  for (let i = 0; i < journals.length; i++) {
    const generation = journals[i]!;
    const name = journalName(generation);
    const path = join(dir, name);
    const noting = noted(pointIn(generation, since));
    const scan = replayFile(path, name, FileKind.Journal, generation, state, noting);
    state.touched = undefined;
    if (noting !== undefined && generation <= since!.generation) print = withFile(print, name, noting.print);
    if (generation === since?.generation && !noting?.boundary) through = false;
    const last = i === journals.length - 1;
    if (scan.damage !== undefined) {
      // Zeros after the last record of the last journal are its
      // preallocated space (journal.ts): nothing written there was lost.
      const freeSpace = last && scan.damage.reason === ZERO_TAIL;
      if (!freeSpace) {
        // Only the end of the last journal can hold a write that never
        // finished; anything else is corruption.
        if (!last || scan.damage.validAfter !== undefined || scan.damage.foreign) return fail(scan.damage);
        if (salvage) return { state, writtenSince: undefined, journal: undefined, notes, damage: scan.damage };
      }
      if (!salvage) truncate(path, scan.end);
      // A file cut short before its header was written has nothing to report.
      if (!freeSpace && scan.damage.bytes > 0)
        notes.push(
          `${name}: dropped ${scan.damage.bytes} bytes at offset ${scan.damage.offset} (${scan.damage.reason}): the end of a write that was never acknowledged`,
        );
    }
    if (last) journal = { generation, end: scan.end, earlierBytes };
    else earlierBytes += scan.end;
  }
  if (!salvage) removeLeftovers(dir, files, base, notes);
  return { state, writtenSince: through ? { ids, print } : undefined, journal, notes, damage: undefined };
}

/** Takes the record of `length` bytes at `at` of `buf` (file offset `base + at`) into `touched`. */
function noteRecord(touched: Touched, state: StoreState, buf: Buffer, base: number, at: number, length: number): void {
  const before = base + at < touched.from;
  state.touched = before ? undefined : touched.ids;
  if (before) touched.print = withRecordAt(touched.print, buf, at);
  if (base + at + length === touched.from) touched.boundary = true;
}

/** The offset in journal `generation` from which its records come after `since`. */
function pointIn(generation: number, since: JournalPoint | undefined): number {
  if (since === undefined || generation > since.generation) return 0;
  return generation === since.generation ? since.end : Infinity;
}

/**
 * The journals must continue the snapshot without a gap: journal-1 on a
 * directory without snapshots, journal-G after snapshot-G. The first
 * missing one, as damage; undefined when none is missing.
 */
function missingJournal(base: number, journals: readonly number[]): Damage | undefined {
  const expectedFirst = base > 0 ? base : 1;
  for (let i = 0; i < journals.length; i++) {
    if (journals[i] !== expectedFirst + i) {
      return {
        file: journalName(expectedFirst + i),
        offset: 0,
        reason: 'this file is missing: the journals do not continue the snapshot',
        bytes: 0,
        validAfter: undefined,
      };
    }
  }
  if (journals.length === 0 && base > 0)
    return {
      file: journalName(base),
      offset: 0,
      reason: 'this file is missing: every snapshot has a journal',
      bytes: 0,
      validAfter: undefined,
    };
  return undefined;
}

/**
 * Files older than the newest snapshot are left over from a compaction that was interrupted after its snapshot was in
 * place.
 */
function removeLeftovers(dir: string, files: DataFiles, base: number, notes: string[]): void {
  for (const g of files.journals) if (g < base) removeLeftover(dir, journalName(g), notes);
  for (const g of files.snapshots) if (g < base) removeLeftover(dir, snapshotName(g), notes);
  for (const temp of files.temps) removeLeftover(dir, temp, notes);
}

function truncate(path: string, length: number): void {
  const fd = openSync(path, 'r+');
  try {
    ftruncateSync(fd, length);
  } finally {
    closeSync(fd);
  }
}

function removeLeftover(dir: string, name: string, notes: string[]): void {
  unlinkSync(join(dir, name));
  notes.push(`removed ${name}, left over from an interrupted compaction`);
}

/** What repair could read back: the state, and every stretch it had to drop. */
interface Salvaged {
  state: StoreState;
  /** In file order; `bytes` is what was dropped there (0 for a missing file or a failed check). */
  dropped: Damage[];
}

/**
 * Repair's reading of a damaged directory, changing no file: the newest
 * snapshot and the journals after it, every record that verifies applied
 * in order. At a stretch that is not a whole record with a good checksum it
 * resynchronises on the next record that is, so damage in the middle of a
 * journal costs the records it covers, not everything after it. A missing
 * journal is noted and the ones after it are still read. Each record holds
 * whole representations, so a later record brings back a user a dropped
 * one touched (docs/storage.md "Repair").
 */
export function salvage(dir: string): Salvaged {
  const files = listDataFiles(dir);
  const state = new StoreState();
  const dropped: Damage[] = [];
  const base = files.snapshots.at(-1) ?? 0;
  if (base > 0) {
    const name = snapshotName(base);
    const endMark = salvageFile(join(dir, name), name, FileKind.Snapshot, base, state, dropped);
    if (endMark !== state.users.size) {
      const reason =
        endMark === undefined
          ? 'the snapshot has no end mark'
          : `the end mark counts ${endMark} users, the snapshot holds ${state.users.size}`;
      dropped.push({ file: name, offset: 0, reason, bytes: 0, validAfter: undefined });
    }
  }
  const journals = files.journals.filter((g) => g >= base);
  const gap = missingJournal(base, journals);
  if (gap !== undefined) dropped.push(gap);
  for (const g of journals) salvageFile(join(dir, journalName(g)), journalName(g), FileKind.Journal, g, state, dropped);
  return { state, dropped };
}

/**
 * Applies every verifying record of one file, adding each stretch it skips to `dropped`; returns a snapshot's end mark.
 */
function salvageFile(
  path: string,
  name: string,
  kind: FileKind,
  generation: number,
  state: StoreState,
  dropped: Damage[],
): number | undefined {
  const buf = readFileSync(path);
  const changedAt = kind === FileKind.Journal ? statSync(path).mtimeMs : undefined;
  refuseNewerFormat(buf, name);
  const problem =
    buf.length < HEADER_BYTES
      ? 'the file header is incomplete'
      : checkHeader(buf.subarray(0, HEADER_BYTES), kind, generation);
  if (problem !== undefined)
    dropped.push({
      file: name,
      offset: 0,
      reason: problem,
      bytes: Math.min(buf.length, HEADER_BYTES),
      validAfter: undefined,
    });
  let endMark: number | undefined;
  let at = HEADER_BYTES;
  while (at < buf.length) {
    const length = recordAt(buf, at);
    if (length > 0) {
      try {
        endMark = applyPayload(state, buf, at + FRAME_BYTES, at + length, kind, changedAt) ?? endMark;
      } catch (error) {
        if (!(error instanceof DataError)) throw error;
        dropped.push({
          file: name,
          offset: at,
          reason: `a record that verifies but does not parse: ${error.message}`,
          bytes: length,
          validAfter: at + length,
        });
      }
      at += length;
      continue;
    }
    const rest = buf.subarray(at);
    // Zeros after the last record: a journal's preallocated space.
    if (isZero(rest)) break;
    const next = findRecord(rest);
    dropped.push({
      file: name,
      offset: at,
      reason: 'bytes that are not a whole record with a good checksum',
      bytes: next ?? rest.length,
      validAfter: next === undefined ? undefined : at + next,
    });
    at += next ?? rest.length;
  }
  return endMark;
}
