/**
 * The durable store: the state in memory (StateStore), every commit appended
 * to a journal in the data directory (format in codec.ts, layout in
 * recovery.ts) before it is acknowledged.
 *
 * Group commit: a commit's record joins the batch being filled, and the
 * commit is applied to the state at once. One batch at a time is written with a single
 * `writev` and made durable with a single `fdatasync`, both on the libuv
 * thread pool; every commit in the batch resolves together after the sync.
 * Commits that arrive meanwhile fill the next batch, so under load one sync
 * acknowledges many writes and the event loop never waits on the disk.
 *
 * The journal grows in preallocated steps of zeros (PREALLOCATION), written
 * along with the batch that needs them: a batch written into space that
 * already exists changes no file metadata, so its fdatasync flushes data
 * pages only, without a file system journal commit. That makes a sync
 * about a third cheaper in CPU and nearly twice as fast. Zeros after the
 * last record are free space (recovery.ts); the file is cut back to its
 * records when it is closed and before compaction starts the next one.
 *
 * A failed write or sync fails every commit not yet acknowledged and stops
 * the store for good: after a failed fsync the kernel may have dropped the
 * dirty pages, so retrying could report success for data that is gone.
 */
import {
  close,
  closeSync,
  fdatasync,
  fsync,
  fsyncSync,
  ftruncate,
  ftruncateSync,
  openSync,
  readSync,
  unlink,
  write,
  writev,
} from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DataError, StoreFailedError, StoreFullError, StoreUnavailableError } from '../../errors.js';
import {
  call,
  fsyncDir,
  fsyncDirSync,
  recreateFile,
  recreateFileSync,
  shareOwnerSync,
  writeAllSync,
} from '../../ops/durable-files.js';
import { FSYNC_BUCKETS, Histogram } from '../../ops/histogram.js';
import type { SavedIndex } from '../memory/field-indexes.js';
import type { Mutation, StoreState } from '../memory/state.js';
import { StateStore, type CommitLog } from '../memory/state-store.js';
import {
  checkRecordSize,
  encodeHeader,
  FRAME_BYTES,
  encodeMutations,
  FileKind,
  FORMAT_VERSION,
  HEADER_BYTES,
  headerVersion,
  recordBound,
  writeRecord,
} from './codec.js';
import { journalName, listDataFiles, recover, snapshotName, type Recovered } from './recovery.js';
import {
  INDEX_CACHE_FILE,
  readIndexCache,
  removeIndexCache,
  writeIndexCache,
  writeIndexCacheSoon,
  type IndexCache,
} from './index-cache.js';
import { withFile, withRecordAt } from './records-print.js';
import { captureImage, writeSnapshot, type Image } from './snapshot.js';

export interface JournalIo {
  writev: typeof writev;
  fdatasync: typeof fdatasync;
}

interface JournalOptions {
  /** Compaction starts once the journal holds at least this many bytes (and twice the live data). */
  compactionFloor: number;
  /** Start-up notes and compaction reports. */
  log: (message: string) => void;
  /** Called once when a write or sync fails: the server must stop. */
  onFatal: (error: Error) => void;
  now?: () => number;
  /** Tests replace the file system calls of the write path to inject failures. */
  io?: JournalIo;
  /** Why the directory must already hold a journal (see StoreOptions): a missing or empty one is refused. */
  usedBefore?: string;
  /** How long a change stays in the feed of changes, in ms. */
  changesRetentionMs?: number;
  /** Users a filter with no sort and no count examines per request (scan-users.ts). */
  findBudget?: number;
}

export const DEFAULT_COMPACTION_FLOOR = 8 * 1024 * 1024;

/** The journal file grows in steps of this many bytes. */
const PREALLOCATION = 1024 * 1024;
/** While the disk is full, how often a write may try again to grow the journal. */
const SPACE_PROBE_MS = 1000;

/** ENOSPC or EDQUOT: the disk or the quota is full; nothing else about the file is in doubt. */
function isNoSpace(error: NodeJS.ErrnoException): boolean {
  return error.code === 'ENOSPC' || error.code === 'EDQUOT';
}
let zeros: Buffer | undefined;

interface Batch {
  /** The records' payloads, framed into one buffer when the batch is written (`encodeBatch`). */
  payloads: string[];
  /** The most bytes their records can take (`recordBound`). */
  bound: number;
  promise: Promise<void>;
  resolve: () => void;
  reject: (error: Error) => void;
  /** No more records join it: it is being written, or it ends its journal. */
  sealed: boolean;
  /** Set on the last batch of a journal: after it, compaction starts the next generation with this image. */
  image: Image | undefined;
}

class Journal implements CommitLog {
  private readonly state: StoreState;
  private fd: number;
  private generation: number;
  /** Bytes in the current journal, header included, once written: where the next batch goes. */
  private size: number;
  /** The file's length: records, then preallocated zeros. */
  private allocated: number;
  /** Bytes in older journals that no snapshot covers yet: an unfinished compaction's. */
  private earlierBytes: number;
  private readonly batches: Batch[] = [];
  private flushing = false;
  private failure: Error | undefined;
  /** Set while the disk is full: writes are refused (503) until a probe grows the file again. */
  private full: StoreFullError | undefined;
  private probing = false;
  /** Set while the writes a full disk refused are taken back out of the state (noSpace). */
  private rollingBack: Promise<void> | undefined;
  private lastProbe = 0;
  /** Once failed: what every read awaits, so nothing applied but never synced is shown. */
  private failed: Promise<void> | undefined;
  /** A compaction under way (its snapshot being written). */
  private compacting: Promise<void> | undefined;
  /** The index cache a compaction writes, once it is under way; never rejects. */
  private cachingIndexes: Promise<void> | undefined;
  /** After a failed compaction, the journal size at which to try again. */
  private retryCompactionAt = 0;
  private closed = false;
  private readonly io: JournalIo;
  private readonly now: () => number;
  private idle: (() => void) | undefined;
  /** Each batch's fdatasync, for GET /metrics: the disk's share of a write's latency. */
  private readonly fsyncSeconds = new Histogram(FSYNC_BUCKETS);

  private constructor(
    private readonly dir: string,
    state: StoreState,
    fd: number,
    generation: number,
    size: number,
    earlierBytes: number,
    private readonly options: JournalOptions,
  ) {
    this.state = state;
    this.fd = fd;
    this.generation = generation;
    this.size = size;
    this.allocated = size;
    this.earlierBytes = earlierBytes;
    this.io = options.io ?? { writev, fdatasync };
    this.now = options.now ?? Date.now;
    this.flushNext = this.flushNext.bind(this);
  }

  /**
   * Recovers the state from `dir` (throws DataError when it cannot do so
   * safely) and opens the journal for appending. Synchronous: it runs before
   * the server listens.
   */
  static open(dir: string, options: JournalOptions): { state: StoreState; journal: Journal } {
    const found = readIndexCache(dir);
    const cache = found !== undefined && 'point' in found ? found : undefined;
    if (found !== undefined && 'refused' in found) dropCache(dir, found.refused, options.log);
    const recovered = recover(dir, cache && { since: cache.point });
    refuseLostJournal(dir, recovered, options.usedBefore);
    for (const note of recovered.notes) options.log(`users-server: ${note}`);
    recovered.state.sweep((options.now ?? Date.now)());
    if (cache !== undefined) offerCache(dir, cache, recovered, options.log);
    let generation: number;
    let fd: number;
    let size: number;
    let earlierBytes = recovered.journal?.earlierBytes ?? 0;
    const last = recovered.journal;
    if (last === undefined || last.end < HEADER_BYTES) {
      // A fresh directory, or a journal whose creation was cut short.
      generation = last?.generation ?? 1;
      fd = createJournalSync(dir, generation);
      size = HEADER_BYTES;
    } else {
      generation = last.generation;
      fd = openSync(join(dir, journalName(generation)), 'r+');
      size = last.end;
      // A truncated tail must stay truncated before anything is appended.
      fsyncSync(fd);
      const version = fileVersion(fd);
      if (version < FORMAT_VERSION) {
        // An older format: its files stay as they are (this version reads
        // them) and new records go to a new journal in the current format,
        // so an older users-server refuses the directory instead of
        // misreading it. The next compaction rewrites everything.
        closeSync(fd);
        earlierBytes += size;
        generation += 1;
        fd = createJournalSync(dir, generation);
        size = HEADER_BYTES;
        options.log(
          `users-server: upgraded ${dir} from data format ${version} to ${FORMAT_VERSION}: new writes go to ${journalName(generation)}; ` +
            `the older files are kept and read as they are until the next compaction rewrites them`,
        );
      }
    }
    const journal = new Journal(dir, recovered.state, fd, generation, size, earlierBytes, options);
    return { state: recovered.state, journal };
  }

  append(mutations: readonly Mutation[]): Promise<void> {
    // Once failed, refuse before the state changes: nothing more can be made durable.
    if (this.failure !== undefined) throw this.failure;
    // Closing: its last flush is under way or done, and the file may be shut; refuse before the state changes.
    if (this.closed) throw new StoreUnavailableError('The server is stopping; retry shortly.');
    // A full disk: refuse before the state changes, and see whether space came back.
    if (this.full !== undefined) {
      this.probeSpace();
      throw this.full;
    }
    // Encoded and measured first: a commit that cannot be written changes
    // nothing. Its bytes are made with the batch's (flushNext).
    const payload = encodeMutations(mutations);
    checkRecordSize(payload);
    let batch = this.batches.at(-1);
    if (batch === undefined || batch.sealed) {
      batch = newBatch();
      this.batches.push(batch);
    }
    batch.payloads.push(payload);
    batch.bound += recordBound(payload);
    // Wait for the rest of this turn of the event loop, so requests read in
    // the same poll share the batch.
    if (!this.flushing) {
      this.flushing = true;
      setImmediate(this.flushNext);
    }
    return batch.promise;
  }

  /** Resolves when everything applied so far is durable; undefined when it already is. */
  durable(): Promise<void> | undefined {
    return this.failed ?? this.rollingBack ?? this.batches.at(-1)?.promise;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.flushing) await new Promise<void>((resolve) => (this.idle = resolve));
    if (this.compacting) await this.compacting;
    await this.cachingIndexes;
    if (this.failure === undefined) {
      // Leave no preallocated space behind.
      try {
        ftruncateSync(this.fd, this.size);
      } catch {
        // Best effort: zeros are free space anyway.
      }
    }
    closeSync(this.fd);
    // With a batch still pending, the state holds a write that is not durable: nothing to keep.
    if (this.failure === undefined && this.full === undefined && this.batches.length === 0) this.saveIndexes();
  }

  /**
   * Keeps the indexes for the next start (index-cache.ts), everything applied durable now; a store that
   * never declared its fields (a command's) leaves the cache as it is.
   */
  private saveIndexes(): void {
    const saved = this.state.fields.saved();
    if (saved === undefined) return;
    try {
      writeIndexCache(this.dir, { generation: this.generation, end: this.size }, saved);
    } catch (error) {
      this.options.log(`users-server: the indexes were not kept for the next start: ${(error as Error).message}`);
    }
  }

  unready(): string | undefined {
    if (this.closed) return 'the journal is closed';
    if (this.full !== undefined) return 'the disk is full: writes are refused until space is freed';
    return this.failure === undefined ? undefined : `the journal cannot be written: ${this.failure.message}`;
  }

  stats(): { journalBytes: number; fsyncSeconds: Histogram; diskFull: boolean } {
    return {
      journalBytes: this.earlierBytes + this.size,
      fsyncSeconds: this.fsyncSeconds,
      diskFull: this.full !== undefined,
    };
  }

  /** Writes and syncs the oldest batch, then the next, until none is left. */
  private flushNext(): void {
    const batch = this.batches[0];
    if (batch === undefined || this.failure !== undefined) {
      this.flushing = false;
      this.idle?.();
      return;
    }
    batch.sealed = true;
    if (batch.payloads.length === 0) {
      this.finishBatch(batch);
      return;
    }
    const records = encodeBatch(batch);
    let end = this.size + records.length;
    let buffers = [records];
    if (end > this.allocated) {
      const allocated = Math.ceil(end / PREALLOCATION) * PREALLOCATION;
      zeros ??= Buffer.alloc(PREALLOCATION);
      buffers = [...buffers, zeros.subarray(0, allocated - end)];
      end = allocated;
    }
    this.writeBatch(batch, records.length, buffers, this.size, end);
  }

  /** Writes `buffers`, which end at `end`, at `position`, then syncs; the batch's records are `bytes` of them. */
  private writeBatch(batch: Batch, bytes: number, buffers: Buffer[], position: number, end: number): void {
    this.io.writev(this.fd, buffers, position, (error, written) => {
      if (error) return isNoSpace(error) ? this.noSpace(error) : this.fail(error);
      if (position + written < end)
        return this.writeBatch(batch, bytes, remainder(buffers, written), position + written, end);
      const syncStarted = performance.now();
      this.io.fdatasync(this.fd, (error) => {
        if (error) return this.fail(error);
        this.fsyncSeconds.observe((performance.now() - syncStarted) / 1000);
        this.size += bytes;
        if (end > this.allocated) this.allocated = end;
        this.finishBatch(batch);
      });
    });
  }

  private finishBatch(batch: Batch): void {
    this.batches.shift();
    batch.resolve();
    let image = batch.image;
    if (image === undefined && !this.closed && this.compacting === undefined && this.compactionDue()) {
      // Everything applied so far belongs to this journal: it ends after
      // the batch being filled, and the image is the state at that end.
      image = { ...captureImage(this.state, this.now()), indexes: this.state.fields.saved(true) };
      const filling = this.batches[0];
      if (filling !== undefined) {
        filling.image = image;
        filling.sealed = true;
        image = undefined;
      }
    }
    if (image === undefined) this.flushNext();
    else this.switchGeneration(image).then(this.flushNext, this.flushNext);
  }

  private compactionDue(): boolean {
    // Every journal since the last snapshot counts: after a crash in the
    // middle of a compaction, the next one covers the older journal too.
    const journals = this.earlierBytes + this.size;
    const live = this.state.userBytes + 64;
    return journals >= this.options.compactionFloor && journals > 2 * live && journals >= this.retryCompactionAt;
  }

  /**
   * Compaction: start journal G+1 (durably, before anything is written to
   * it), then write snapshot G+1 from the image taken at the end of journal
   * G, and only then remove generation G. A crash at any point leaves
   * snapshot G + journal G + journal G+1, or snapshot G+1 + journal G+1:
   * both are the whole state.
   */
  private async switchGeneration(image: Image): Promise<void> {
    const next = this.generation + 1;
    let fd: number;
    try {
      // Journal G ends where its records end: only the last journal may
      // hold free space, so anything after the records of an older one is damage.
      await call<void>((cb) => ftruncate(this.fd, this.size, cb));
      this.allocated = this.size;
      await call<void>((cb) => fdatasync(this.fd, cb));
      fd = await createJournal(this.dir, next);
    } catch (error) {
      this.compactionFailed(error as Error);
      return;
    }
    closeSync(this.fd);
    this.fd = fd;
    this.generation = next;
    const before = this.earlierBytes + this.size;
    // Until the snapshot is in place, the old journals are still needed.
    this.earlierBytes = before;
    this.size = HEADER_BYTES;
    this.allocated = HEADER_BYTES;
    const temp = join(this.dir, `${snapshotName(next)}.tmp`);
    const started = performance.now();
    let records = 0;
    const written = (record: Buffer) => (records = withRecordAt(records, record, 0));
    this.compacting = writeSnapshot(image, next, temp, join(this.dir, snapshotName(next)), written)
      .then(async (snapshotBytes) => {
        await fsyncDir(this.dir);
        this.earlierBytes = 0;
        await removeOlderThan(this.dir, next);
        const ms = Math.round(performance.now() - started);
        this.options.log(
          `users-server: compacted ${before} journal bytes into a ${snapshotBytes}-byte snapshot of ${image.users.length} users in ${ms} ms`,
        );
        if (image.indexes !== undefined && image.indexes.length > 0) this.cacheIndexes(next, records, image.indexes);
      })
      .catch((error: unknown) => {
        // The journals still hold everything (writeSnapshot removed its partial file).
        this.compactionFailed(error as Error);
      })
      .finally(() => (this.compacting = undefined));
  }

  /**
   * Writes the index cache at the start of journal `generation`, over its
   * snapshot, whose records print `records`: after the cache being written,
   * if one is, without holding the event loop, and while it is still wanted.
   */
  private cacheIndexes(generation: number, records: number, indexes: SavedIndex[]): void {
    const files = withFile(withFile(0, snapshotName(generation), records), journalName(generation), 0);
    const point = { generation, end: HEADER_BYTES };
    // Not once a later compaction has begun, the store closes (it keeps its own), or the disk is full.
    const wanted = () => this.generation === generation && !this.closed && this.full === undefined;
    this.cachingIndexes = (this.cachingIndexes ?? Promise.resolve())
      .then(async () => {
        const started = performance.now();
        if (!wanted() || !(await writeIndexCacheSoon(this.dir, point, files, indexes, wanted))) return;
        const ms = Math.round(performance.now() - started);
        this.options.log(
          `users-server: kept the indexes of ${indexes.length} fields in ${INDEX_CACHE_FILE} in ${ms} ms`,
        );
      })
      .catch((error: Error) =>
        this.options.log(`users-server: the indexes were not kept at compaction: ${error.message}`),
      );
  }

  private compactionFailed(error: Error): void {
    // The journals still hold everything: serving goes on, compaction waits
    // for the journal to grow by another floor.
    this.retryCompactionAt = this.earlierBytes + this.size + this.options.compactionFloor;
    this.options.log(`users-server: compaction failed, will retry later: ${error.message}`);
  }

  /**
   * A batch the disk had no room for: nothing of it (or of the batches
   * after it) is durable, yet their writes are applied in memory. New
   * writes are refused at once; the refused ones are taken back out of the
   * state (rollBack), then answered 503, and writes stay refused until a
   * probe finds space again. Reads never saw them: they wait for
   * durability, and meanwhile for the rollback.
   */
  private noSpace(error: NodeJS.ErrnoException): void {
    const full = new StoreFullError(
      `the disk holding the journal is full (${error.code}): the write was not made; free some space`,
    );
    this.full = full;
    const refused = this.batches.splice(0);
    const rollingBack = this.rollBack().then(
      () => {
        this.rollingBack = undefined;
        this.state.sweep(this.now());
        this.lastProbe = this.now();
        this.options.log(
          `users-server: the disk is full (${error.code}): writes are refused with 503 until space is freed; reads go on`,
        );
        for (const batch of refused) batch.reject(full);
        this.flushing = false;
        this.idle?.();
      },
      (cause: Error) => {
        this.rollingBack = undefined;
        this.batches.unshift(...refused);
        this.fail(cause);
        // Reads waiting for the rollback must not see the state it could not restore.
        throw this.failure;
      },
    );
    rollingBack.catch(() => {});
    this.rollingBack = rollingBack;
  }

  /**
   * Cuts the file back to its last durable record and reads the state back
   * from the directory, as a restart would. A compaction under way renames
   * and removes files, so the directory is read once it has finished.
   */
  private async rollBack(): Promise<void> {
    ftruncateSync(this.fd, this.size);
    this.allocated = this.size;
    await this.compacting;
    this.state.replaceWith(recover(this.dir).state);
  }

  /**
   * While the disk is full, at most once a SPACE_PROBE_MS: grow the file by a step of zeros; if that syncs, writes are
   * accepted again.
   */
  private probeSpace(): void {
    if (this.probing || this.rollingBack !== undefined || this.closed || this.now() - this.lastProbe < SPACE_PROBE_MS)
      return;
    this.probing = true;
    this.lastProbe = this.now();
    zeros ??= Buffer.alloc(PREALLOCATION);
    const at = this.allocated;
    this.io.writev(this.fd, [zeros], at, (error, written) => {
      if (error || written < zeros!.length) {
        this.probing = false;
        // Leave no partial step behind; zeros past the records are free space anyway.
        ftruncate(this.fd, at, () => {});
        return;
      }
      this.io.fdatasync(this.fd, (syncError) => {
        this.probing = false;
        if (syncError) return this.fail(syncError);
        this.allocated = at + written;
        this.full = undefined;
        this.options.log('users-server: disk space is back: writes are accepted again');
      });
    });
  }

  private fail(error: Error): void {
    const failure = new StoreFailedError(`journal write failed: ${error.message}`, { cause: error });
    this.failure = failure;
    this.failed = Promise.reject(failure);
    this.failed.catch(() => {});
    for (const batch of this.batches.splice(0)) batch.reject(failure);
    this.flushing = false;
    this.idle?.();
    this.options.onFatal(failure);
  }
}

function newBatch(): Batch {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A failed batch may have no waiter left (its requests were abandoned).
  promise.catch(() => {});
  return { payloads: [], bound: 0, promise, resolve, reject, sealed: false, image: undefined };
}

/** Past this bound a batch's buffer is sized by counting its bytes. */
const EXACT_SIZE_PAST = 4 * 1024 * 1024;

/**
 * The batch's records in one buffer: one allocation and one write per
 * batch, where a buffer per record cost each commit an allocation and a
 * second pass over its text to count its bytes.
 */
function encodeBatch(batch: Batch): Buffer {
  // A batch of large writes is sized exactly: its bound can be three times its bytes.
  const size =
    batch.bound <= EXACT_SIZE_PAST
      ? batch.bound
      : batch.payloads.reduce((sum, payload) => sum + FRAME_BYTES + Buffer.byteLength(payload), 0);
  const buf = Buffer.allocUnsafe(size);
  let offset = 0;
  for (const payload of batch.payloads) offset += writeRecord(buf, offset, payload);
  return buf.subarray(0, offset);
}

/** The buffers still to write after the first `written` bytes. */
function remainder(buffers: Buffer[], written: number): Buffer[] {
  const rest: Buffer[] = [];
  for (const buf of buffers) {
    if (written >= buf.length) written -= buf.length;
    else {
      rest.push(written > 0 ? buf.subarray(written) : buf);
      written = 0;
    }
  }
  return rest;
}

/**
 * A journal header the disk took only part of, without an error of its own:
 * a full disk, with the code ENOSPC that a full disk's failed write has, so
 * it is told and answered as one.
 */
class ShortHeaderError extends Error {
  override readonly name = 'ShortHeaderError';
  readonly code = 'ENOSPC';
}

/**
 * Creates journal `generation` with its header, durably: the file is synced,
 * then its directory, so the new name survives a crash before any record
 * in it is acknowledged.
 */
async function createJournal(dir: string, generation: number): Promise<number> {
  const fd = await recreateFile(join(dir, journalName(generation)), 0o600);
  try {
    shareOwnerSync(fd, dir);
    const header = encodeHeader(FileKind.Journal, generation);
    // A disk with less room than a header takes part of it without an error.
    const written = await call<number>((cb) => write(fd, header, 0, header.length, null, cb));
    if (written < header.length)
      throw new ShortHeaderError(`no space left for the header of ${journalName(generation)}`);
    await call<void>((cb) => fsync(fd, cb));
    await fsyncDir(dir);
  } catch (error) {
    // A journal without its header (a full disk) must not be left for the next start.
    await call<void>((cb) => close(fd, cb));
    await call<void>((cb) => unlink(join(dir, journalName(generation)), cb)).catch(() => {});
    throw error;
  }
  return fd;
}

/**
 * A directory an earlier start used (its secret is there) whose first
 * journal is missing or empty, with no snapshot, lost its users: starting
 * empty would issue id 1 again. (The first start writes the journal's
 * header before the secret, so a crash cannot leave this behind.)
 */
function refuseLostJournal(dir: string, recovered: Recovered, usedBefore: string | undefined): void {
  if (usedBefore === undefined) return;
  const journal = recovered.journal;
  if (journal !== undefined && (journal.generation !== 1 || journal.end >= HEADER_BYTES)) return;
  const what = journal === undefined ? 'no journal or snapshot' : `an empty ${journalName(1)}`;
  throw new DataError(
    `${dir} holds ${usedBefore} from an earlier start but ${what}: its users are not here, and starting would issue id 1 again. ` +
      `Restore ${journalName(1)} (and any snapshot) from a backup; to start this directory empty on purpose, move its secret and admin-password files away first`,
  );
}

/** The format version in the header of the open file `fd`. */
function fileVersion(fd: number): number {
  const header = Buffer.alloc(HEADER_BYTES);
  readSync(fd, header, 0, HEADER_BYTES, 0);
  return headerVersion(header);
}

/** createJournal, at start-up, before anything is served. */
export function createJournalSync(dir: string, generation: number): number {
  const fd = recreateFileSync(join(dir, journalName(generation)), 0o600);
  shareOwnerSync(fd, dir);
  writeAllSync(fd, encodeHeader(FileKind.Journal, generation));
  fsyncSync(fd);
  fsyncDirSync(dir);
  return fd;
}

async function removeOlderThan(dir: string, generation: number): Promise<void> {
  const files = listDataFiles(dir);
  const names = [
    ...files.journals.filter((g) => g < generation).map(journalName),
    ...files.snapshots.filter((g) => g < generation).map(snapshotName),
  ];
  for (const name of names) await call<void>((cb) => unlink(join(dir, name), cb));
}

/** Users written since a cache that are entered again whatever the users' count: tens of milliseconds' work. */
const REENTERED_ANYWAY = 10_000;

/**
 * The cached indexes for the fields the start declares next, when the
 * journals ran through the cache's point and the users written after it are
 * few enough that entering them again costs less than a build; else the
 * cache is dropped.
 */
function offerCache(dir: string, cache: IndexCache, recovered: Recovered, log: (line: string) => void): void {
  const { state, writtenSince } = recovered;
  if (writtenSince === undefined) return dropCache(dir, 'the journals no longer run through where it was written', log);
  if (writtenSince.print !== cache.files) return dropCache(dir, 'it was written over other data files', log);
  const { ids } = writtenSince;
  if (ids.size > Math.max(REENTERED_ANYWAY, state.users.size / 4))
    return dropCache(dir, `${ids.size} users were written since, more than a build costs`, log);
  const changed = new Map<number, string | undefined>();
  for (const id of ids) changed.set(id, state.users.get(id)?.json);
  const read = () => {
    const saved = cache.read();
    if (saved === undefined) dropCache(dir, 'its lists do not add up to its header', log);
    else
      log(`users-server: read the indexes from ${INDEX_CACHE_FILE}, ${changed.size} users written since entered again`);
    return saved;
  };
  state.fields.offer({ fields: cache.fields, read, changed });
}

/** Removes a cache a start does not take, saying why: declared fields are then built from the users. */
function dropCache(dir: string, why: string, log: (line: string) => void): void {
  try {
    removeIndexCache(dir);
    log(`users-server: removed ${INDEX_CACHE_FILE} (${why}): declared fields are indexed from the users`);
  } catch (error) {
    log(
      `users-server: ${INDEX_CACHE_FILE} is not taken (${why}) and could not be removed: ${(error as Error).message}`,
    );
  }
}

/** `--store journal`: the state recovered from `dir`, every write made durable in its journal. */
export function openJournalStore(dir: string, options: JournalOptions): StateStore {
  const { state, journal } = Journal.open(dir, options);
  return new StateStore(state, journal, {
    ...(options.changesRetentionMs !== undefined && { changesRetentionMs: options.changesRetentionMs }),
    ...(options.now !== undefined && { now: options.now }),
    ...(options.findBudget !== undefined && { findBudget: options.findBudget }),
  });
}
