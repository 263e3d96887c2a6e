/**
 * `usersctl import`: NDJSON in, one PUT per line with bounded concurrency,
 * one NDJSON result per line out, in input order. Every line goes to a
 * stable URI, so a re-run replaces instead of duplicating.
 */
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { USERS_PATH, userPath } from '../shared/endpoints.js';
import { isId, parseRef } from '../shared/user.js';
import type { Context } from './context.js';
import { CliError, EXIT, NetworkError, UnexpectedAnswerError, CliUsageError } from './exit-codes.js';
import { answerUser, detailOf } from './answers.js';
import { fileProblem } from '../shared/file-errors.js';
import { readLines, type Line } from './streams.js';
import { isUuid, uuidV5Generator } from './uuid.js';
import { endRecordUsers, EXPORT_HEADER, EXPORT_HEADER_V1, parseRecord, type ExportRecord } from './export-format.js';
import { Restorer } from './restore.js';
import { startProgress } from './progress.js';

/**
 * UUIDv5(NAMESPACE_URL, "tag:users-server,2026:usersctl/import"): the
 * namespace of the default line-derived aliases. Fixed forever: changing it
 * would make every re-run of an old file create duplicates.
 */
export const DEFAULT_IMPORT_NAMESPACE = '8e6f3a6f-2192-55ef-a51e-795616485cf6';
export const DEFAULT_CONCURRENCY = 8;
export const MAX_CONCURRENCY = 256;

export interface ImportOptions {
  /** The input named as the argument. */
  input?: string;
  /** The input named with -f: the same as the argument. */
  file?: string;
  concurrency: number;
  aliasField?: string;
  uuidNamespace?: string;
  /** An export's records keep their ids (else they get new ones). */
  keepIds?: boolean;
  /** An export's record may replace a user that exists with other content. */
  overwrite?: boolean;
}

type Job =
  | { kind: 'put'; path: string; body: Buffer }
  | { kind: 'restore'; record: ExportRecord }
  | { kind: 'result'; text: string }
  | { kind: 'end'; users: number };

/** Pause reading while this much output waits for a slow stdout. */
const OUTPUT_HIGH_WATER = 1 << 20;

type Stats = { lines: number; ok: number; created: number; unchanged: number; failed: number; bytes: number };

export async function importUsers(ctx: Context, options: ImportOptions): Promise<number> {
  if (options.aliasField !== undefined && options.uuidNamespace !== undefined)
    throw new CliUsageError('--alias-field and --uuid-namespace are alternatives: give one');
  if (options.uuidNamespace !== undefined && !isUuid(options.uuidNamespace))
    throw new CliUsageError(`--uuid-namespace must be a UUID, not ${JSON.stringify(options.uuidNamespace)}`);
  if (options.input !== undefined && options.file !== undefined && options.input !== options.file) {
    throw new CliUsageError(
      `two inputs given (${JSON.stringify(options.input)} and -f ${JSON.stringify(options.file)}): name the file once`,
    );
  }
  const file = options.input ?? options.file;
  // A jar that cannot be read fails the command once, not each line.
  await ctx.client.session.load();
  const { input, size, close } = await openInput(ctx, file);
  const run = new ImportRun(ctx, options);
  const { stats } = run;
  ctx.interruption.onForcedStop(() => run.howFar());
  const progress = startProgress(
    ctx,
    'lines',
    () => ({
      done: stats.lines,
      failed: stats.failed,
      ...(size !== undefined && size > 0 && { fraction: stats.bytes / size }),
    }),
    run.started,
  );
  // A signal while waiting for stdin: end the input, so the loop sees the stop.
  if (size === undefined) ctx.interruption.onStop(() => (input as Partial<{ destroy(): void }>).destroy?.());
  try {
    await run.consume(input);
    // Only when reading stopped at a line: a stop after the last line was read (a result that could not be printed)
    // left nothing unsent.
    if (run.stoppedAt > 0 && size !== undefined && file !== undefined)
      run.notSent += await countLinesFrom(file, run.stoppedAt);
  } finally {
    progress?.stop();
    await close();
  }
  if (progress !== undefined) printSummary(ctx, run.stats, run.started);
  const stop = ctx.interruption.reason;
  if (stop !== undefined) {
    const rest =
      size === undefined
        ? `${run.notSent > 0 ? `${run.notSent} line and ` : ''}the rest of stdin`
        : String(run.notSent);
    ctx.fail(
      `interrupted (${ctx.interruption.label}): imported ${run.stats.ok}, failed ${run.stats.failed}, not sent ${rest}`,
    );
    ctx.stopReported = true;
    return EXIT.ok;
  }
  if (run.stop !== undefined)
    throw new CliError(`${run.stop.message}; import stopped after line ${run.lastLine}`, run.stop.exitCode);
  const damage = run.exportDamage();
  if (damage !== undefined) ctx.fail(damage);
  if (run.stats.failed > 0) {
    if (progress === undefined)
      ctx.fail(`${run.stats.failed} of ${run.stats.lines} lines failed; their results on stdout say why`);
    return EXIT.partialImport;
  }
  return damage === undefined ? EXIT.ok : EXIT.partialImport;
}

function printSummary(ctx: Context, stats: Stats, started: number): void {
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const failed = stats.failed === 0 ? '0 failed' : ctx.paint(`${stats.failed} failed`, '31');
  const unchanged = stats.unchanged === 0 ? '' : `, ${stats.unchanged} unchanged`;
  ctx.io.stderr.write(
    `usersctl: ${stats.lines} lines in ${seconds} s: ${stats.ok} ok (${stats.created} created, ${stats.ok - stats.created - stats.unchanged} replaced${unchanged}), ${failed}\n`,
  );
}

/** One import: lines in, at most `concurrency` PUTs in flight, results out in input order. */
class ImportRun {
  readonly stats: Stats = { lines: 0, ok: 0, created: 0, unchanged: 0, failed: 0, bytes: 0 };
  readonly started = Date.now();
  /** Why the import stopped early: the server could not be reached, or what answered is not users-server. */
  stop: NetworkError | UnexpectedAnswerError | undefined;
  lastLine = 0;
  /** Input lines left unsent by an early stop (counted to the end of a file; stdin's rest is unknown). */
  notSent = 0;
  /** The input's byte offset after the last line read. */
  stoppedAt = 0;
  private readonly results: OrderedResults;
  private readonly aliasOf: (name: Uint8Array) => string;
  private readonly window: number;
  /** Set by the first line: an export (its header) or plain user lines. */
  private format: 'export' | 'lines' | undefined;
  /** An export of the current version, which ends with an end record. */
  private endExpected = false;
  /** The export's end record, once read: its count, and the records read before it. */
  private end: { users: number; records: number } | undefined;
  private concurrency: number;
  private readonly restorer: Restorer;
  private sequence = 0;
  private inFlight = 0;
  private wake: (() => void) | undefined;

  constructor(
    private readonly ctx: Context,
    private readonly options: ImportOptions,
  ) {
    this.aliasOf = uuidV5Generator(options.uuidNamespace ?? DEFAULT_IMPORT_NAMESPACE);
    this.window = Math.max(256, options.concurrency * 32);
    this.concurrency = options.concurrency;
    this.restorer = new Restorer(ctx, { keepIds: options.keepIds === true, overwrite: options.overwrite === true });
    this.results = new OrderedResults(ctx, () => this.wake?.());
  }

  /** Reads the first line's kind: an export's header is consumed (true), anything else is data. */
  private takeHeader(line: Line): boolean {
    if (line.tooLong === undefined && line.bytes.toString('utf8').trim() === '') return true;
    const first = line.bytes.toString('utf8').trim();
    const header = first === EXPORT_HEADER || first === EXPORT_HEADER_V1;
    this.format = header ? 'export' : 'lines';
    this.endExpected = first === EXPORT_HEADER;
    if (header) {
      if (this.options.aliasField !== undefined || this.options.uuidNamespace !== undefined) {
        throw new CliUsageError(
          'this input is an export (usersctl export): its records carry their ids and aliases, so --alias-field and --uuid-namespace do not apply',
        );
      }
      // Ids are issued in order: keeping them means one record at a time, in the export's id order.
      if (this.options.keepIds === true) this.concurrency = 1;
    } else if (this.options.keepIds === true || this.options.overwrite === true) {
      throw new CliUsageError(
        '--keep-ids and --overwrite apply to an export (usersctl export); this input is plain user lines',
      );
    }
    return header;
  }

  /**
   * How far the import got, for a stop that does not wait for the requests in flight: the results printed, and the
   * lines without one.
   */
  howFar(): string {
    const { printed, lastPrinted, completed } = this.results;
    // The requests in flight, and the results that came but wait for stdout.
    const unprinted = this.inFlight + completed - printed;
    const done =
      printed === 0
        ? 'no result printed'
        : `results printed through line ${lastPrinted} (${printed} line${printed === 1 ? '' : 's'})`;
    const open =
      unprinted === 0
        ? ''
        : `; ${unprinted} line${unprinted === 1 ? '' : 's'} more without a printed result (those sent may have been imported)`;
    return `${done}${open}; the rest not sent: the same import run again finishes it`;
  }

  /**
   * Why the export read is not whole (cut short, lines missing), once the input has ended; undefined when it is whole
   * or no export.
   */
  exportDamage(): string | undefined {
    if (this.format !== 'export' || !this.endExpected) return undefined;
    const { lines, ok } = this.stats;
    if (this.end === undefined)
      return `the export was cut short: it ends after ${lines} users without its end record (an export stopped early, by Ctrl-C, a full disk or a lost connection); ${ok} of them were imported: export again and import that`;
    if (this.end.users === this.end.records) return undefined;
    return `the export is damaged: its end record counts ${this.end.users} users, but ${this.end.records} came before it; export again and import that`;
  }

  async consume(input: Parameters<typeof readLines>[0]): Promise<void> {
    try {
      await this.readAll(input);
    } catch (error) {
      // The input was ended by a signal (its stream destroyed): what was read is what there is.
      if (this.ctx.interruption.reason === undefined) throw error;
    }
    while (this.inFlight > 0) await this.waitForResult();
    await this.results.flush();
  }

  private async readAll(input: Parameters<typeof readLines>[0]): Promise<void> {
    for await (const line of readLines(input)) {
      this.stats.bytes += (line.tooLong ?? line.bytes.length) + 1;
      if (this.stop !== undefined) break;
      if (this.ctx.interruption.reason !== undefined) {
        // This line and the rest of the input are not sent.
        this.notSent++;
        this.stoppedAt = line.end;
        break;
      }
      this.lastLine = line.number;
      if (this.format === undefined && this.takeHeader(line)) continue;
      const job =
        this.end !== undefined
          ? afterEnd(line)
          : this.format === 'export'
            ? prepareRecord(line)
            : prepare(line, this.options.aliasField, this.aliasOf);
      if (job === undefined) continue;
      if (job.kind === 'end') {
        this.end = { users: job.users, records: this.stats.lines };
        continue;
      }
      this.stats.lines++;
      const seq = this.sequence++;
      if (job.kind === 'result') {
        this.stats.failed++;
        this.results.complete(seq, line.number, job.text);
        continue;
      }
      while (this.inFlight >= this.concurrency || seq - this.results.nextToPrint >= this.window)
        await this.waitForResult();
      if (this.results.pendingChars > OUTPUT_HIGH_WATER) await this.results.flush();
      this.inFlight++;
      void (job.kind === 'put' ? this.put(seq, line, job.path, job.body) : this.restore(seq, line, job.record));
    }
  }

  private async waitForResult(): Promise<void> {
    await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = undefined;
  }

  private async put(seq: number, line: Line, path: string, body: Buffer): Promise<void> {
    let text: string;
    try {
      const response = await this.ctx.client.send({ method: 'PUT', path, headers: PUT_HEADERS, body });
      if (response.status === 200 || response.status === 201) {
        if (response.text !== '') answerUser(response);
        this.stats.ok++;
        if (response.status === 201) this.stats.created++;
        // The status says what the PUT did: 201 a user created, 200 one replaced (or left as it was).
        const action = response.status === 201 ? 'created' : 'replaced';
        text = `{"line":${line.number},"ok":true,"action":"${action}","user":${response.text === '' ? 'null' : response.text}}`;
      } else {
        this.stats.failed++;
        text = failure(line.number, response.status, detailOf(response));
      }
    } catch (error) {
      this.stats.failed++;
      if (error instanceof NetworkError || error instanceof UnexpectedAnswerError) this.stop ??= error;
      text = failure(line.number, 0, error instanceof Error ? error.message : String(error));
    } finally {
      this.inFlight--;
    }
    this.results.complete(seq, line.number, text);
  }

  private async restore(seq: number, line: Line, record: ExportRecord): Promise<void> {
    let text: string;
    // With new ids every user is created under an alias, so that a re-run finds it: a record without one gets its
    // line's.
    const lineAlias = this.aliasOf(line.bytes);
    const alias = this.options.keepIds === true ? record.alias : (record.alias ?? lineAlias);
    const where = { line: line.number, oldId: record.id, alias };
    try {
      const restored = await this.restorer.restore(record, lineAlias);
      if (restored.ok) {
        this.stats.ok++;
        if (restored.action === 'created') this.stats.created++;
        if (restored.action === 'unchanged') this.stats.unchanged++;
        text = JSON.stringify({
          ...where,
          alias: restored.alias === undefined ? alias : restored.alias,
          ok: true,
          action: restored.action,
          id: restored.id,
        });
        // The replaced version as the target stored it, byte for byte (parsed, a large number could change).
        if (restored.previous !== undefined) text = `${text.slice(0, -1)},"previous":${restored.previous}}`;
      } else {
        this.stats.failed++;
        text = JSON.stringify({ ...where, ok: false, status: restored.status, error: restored.error });
      }
    } catch (error) {
      this.stats.failed++;
      if (error instanceof NetworkError || error instanceof UnexpectedAnswerError) this.stop ??= error;
      text = JSON.stringify({
        ...where,
        ok: false,
        status: 0,
        error: error instanceof Error ? error.message : String(error),
      });
    } finally {
      this.inFlight--;
    }
    this.results.complete(seq, line.number, text);
  }
}

const PUT_HEADERS = { accept: 'application/json', 'content-type': 'application/json' };

/** Results that arrive in any order, written to stdout in input order, one write per turn of the event loop. */
class OrderedResults {
  /** The sequence number of the next result to print. */
  nextToPrint = 0;
  /** Results written to stdout, and the input line of the last of them. */
  printed = 0;
  /** Results given to `complete`, printed or not. */
  completed = 0;
  lastPrinted = 0;
  private readonly done = new Map<number, { line: number; text: string }>();
  private pending = '';
  /** The results in `pending`, and the line of its last. */
  private pendingCount = 0;
  private pendingLast = 0;
  private flushing: Promise<void> | undefined;
  private flushScheduled = false;

  constructor(
    private readonly ctx: Context,
    private readonly onComplete: () => void,
  ) {}

  get pendingChars(): number {
    return this.pending.length;
  }

  complete(seq: number, line: number, text: string): void {
    this.completed++;
    this.done.set(seq, { line, text });
    for (let result = this.done.get(this.nextToPrint); result !== undefined; result = this.done.get(this.nextToPrint)) {
      this.done.delete(this.nextToPrint++);
      this.pending += result.text + '\n';
      this.pendingCount++;
      this.pendingLast = result.line;
    }
    if (!this.flushScheduled && this.pending !== '') {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        void this.flush();
      });
    }
    this.onComplete();
  }

  /** Writes what is pending; resolves once stdout took it. */
  flush(): Promise<void> {
    // drain awaits before its finally runs, so `flushing` is set before it is cleared.
    if (this.flushing === undefined && this.pending !== '') this.flushing = this.drain();
    return this.flushing ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending !== '') {
        const [text, count, last] = [this.pending, this.pendingCount, this.pendingLast];
        this.pending = '';
        this.pendingCount = 0;
        await this.ctx.out.write(text);
        if (this.ctx.out.stopped) continue;
        this.printed += count;
        this.lastPrinted = last;
      }
    } finally {
      this.flushing = undefined;
    }
  }
}

/** A line's JSON value; undefined for a blank line, a failure result for one that is not JSON. */
function parseLine(line: Line): unknown {
  if (line.tooLong !== undefined)
    return new LineFailure(
      failure(
        line.number,
        0,
        `the line is ${line.tooLong} bytes long, more than the 64 MiB users-server takes in a body; it was not sent`,
      ),
    );
  const text = line.bytes.toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    return new LineFailure(failure(line.number, 0, `invalid JSON: ${(error as Error).message}`));
  }
}

/** A line refused before anything is sent: its result, as a job. */
class LineFailure {
  readonly kind = 'result';
  constructor(readonly text: string) {}
}

function isFailure(value: unknown): value is LineFailure {
  return value instanceof LineFailure;
}

/** What to do with one input line: a PUT, an immediate failure, or nothing (blank). */
function prepare(line: Line, aliasField: string | undefined, aliasOf: (name: Uint8Array) => string): Job | undefined {
  const user = parseLine(line);
  if (user === undefined || isFailure(user)) return user;
  if (typeof user !== 'object' || user === null || Array.isArray(user)) {
    return { kind: 'result', text: failure(line.number, 0, 'a line must be a JSON object') };
  }
  const record = user as Record<string, unknown>;
  let path: string;
  if (isId(record.id)) {
    // The user already has an id: PUT replaces it (or creates it under a live reservation).
    path = userPath(record.id);
  } else if (aliasField !== undefined) {
    const alias = record[aliasField];
    if (typeof alias !== 'string' || parseRef(alias).kind !== 'alias') {
      return {
        kind: 'result',
        text: failure(
          line.number,
          0,
          `field "${aliasField}" must be an alias: 1 to 200 of A-Z a-z 0-9 . _ ~ - with a non-digit`,
        ),
      };
    }
    path = `${USERS_PATH}/${alias}`;
  } else {
    // The line's own bytes name it: the same line always PUTs to the same alias.
    path = `${USERS_PATH}/${aliasOf(line.bytes)}`;
  }
  return { kind: 'put', path, body: line.bytes };
}

/** An export's record line: a restore, its end, an immediate failure, or nothing (blank). */
function prepareRecord(line: Line): Job | undefined {
  const value = parseLine(line);
  if (value === undefined || isFailure(value)) return value;
  const users = endRecordUsers(value);
  if (users !== undefined) return { kind: 'end', users };
  const record = parseRecord(value);
  return typeof record === 'string'
    ? { kind: 'result', text: failure(line.number, 0, record) }
    : { kind: 'restore', record };
}

/** A line after an export's end record: a failure, or nothing (blank). */
function afterEnd(line: Line): Job | undefined {
  if (line.tooLong === undefined && line.bytes.toString('utf8').trim() === '') return undefined;
  return {
    kind: 'result',
    text: failure(line.number, 0, 'a line after the end record of the export; it was not sent'),
  };
}

/** The non-blank lines of `file` from byte `start` on (what an early stop left unsent). */
async function countLinesFrom(file: string, start: number): Promise<number> {
  let count = 0;
  for await (const line of readLines(createReadStream(file, { start }))) if (line.bytes.length > 0) count++;
  return count;
}

function failure(line: number, status: number, error: string): string {
  return JSON.stringify({ line, ok: false, status, error });
}

async function openInput(
  ctx: Context,
  file: string | undefined,
): Promise<{ input: AsyncIterable<Buffer | string>; size: number | undefined; close: () => Promise<void> }> {
  if (file === undefined || file === '-') {
    if (ctx.io.stdin.isTTY === true) ctx.info('reading NDJSON from the terminal; end with Ctrl-D (or give -f FILE)');
    return { input: ctx.io.stdin as AsyncIterable<Buffer | string>, size: undefined, close: async () => {} };
  }
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    throw new CliUsageError(fileProblem('read', file, error));
  }
  const stat = await handle.stat();
  // A folder opens for reading on Linux; its first read would fail with EISDIR, said here as that read would.
  if (stat.isDirectory()) {
    await handle.close();
    throw new CliUsageError(fileProblem('read', file, { code: 'EISDIR' }));
  }
  const stream = handle.createReadStream({ highWaterMark: 256 * 1024, autoClose: false });
  return {
    input: stream,
    size: stat.isFile() ? stat.size : undefined,
    close: async () => {
      stream.destroy();
      await handle.close();
    },
  };
}
