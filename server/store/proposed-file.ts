/**
 * A settings file of a data directory that what holds the users owns, for
 * the memory and journal stores: the declared fields (`indexes`) and the
 * schema of the users' fields (`schema`). Mode 0600, replaced atomically.
 * Only what holds the users writes it, once the users fit it: the server
 * running on the directory, or a command while no server runs (holding the
 * directory's lock). A command asks a running server by writing what it
 * wants to `<name>.proposed`; the server applies it and writes `<name>`, or
 * refuses it and writes why to `<name>.refused`, then removes the proposal:
 * its removal is the answer. The server looks every PROPOSAL_POLL_MS.
 */
import { existsSync, readFileSync, statSync, unwatchFile, watchFile } from 'node:fs';
import { join } from 'node:path';
import { DataError, ServerCommandError } from '../errors.js';
import { lockIfIdle, withEditLock } from '../ops/data-dir.js';
import { removeFileSync, replaceFileSync } from '../ops/durable-files.js';
import type { StoredUser } from '../users/rules.js';
import { readJournalData } from './journal/dump-files.js';

/** How often a running server looks for a proposal: a stat on the thread pool, off the request path. */
const PROPOSAL_POLL_MS = 250;
/** How long a command waits for a running server to answer its proposal. */
const ANSWER_WAIT_MS = 30_000;

/** One kind of kept file: its name in the data directory and its text. */
export interface KeptFile<T> {
  readonly name: string;
  /** What a directory without the file holds. */
  readonly absent: T;
  /** The value of a file's text; throws DataError naming what is wrong. */
  parse(text: string, path: string): T;
  serialize(value: T): string;
}

/** The users a command checks a change against in a directory no server runs on. */
export type UsersOnDisk = readonly Pick<StoredUser, 'id' | 'json'>[];

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new DataError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/**
 * The JSON object of a kept file's text at `path`, checked to be of
 * `format`: else a DataError saying it is not `what` (a declarations
 * file, a schema file) of that format.
 */
export function parseKeptJson(text: string, path: string, format: number, what: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new DataError(`${path}: not valid JSON`);
  }
  const fields = typeof doc === 'object' && doc !== null && !Array.isArray(doc) ? (doc as Record<string, unknown>) : {};
  if (fields.format !== format) throw new DataError(`${path}: not ${what} of format ${format}`);
  return fields;
}

/** What the data directory `dir` holds of `file`: `file.absent` without it. Throws DataError. */
export function readKeptFile<T>(dir: string, file: KeptFile<T>): T {
  const path = join(dir, file.name);
  const text = readText(path);
  return text === undefined ? file.absent : file.parse(text, path);
}

/** Replaces `<dir>/<name>` atomically and durably. */
export function writeKeptFile<T>(dir: string, file: KeptFile<T>, value: T): void {
  replaceFileSync(dir, join(dir, file.name), file.serialize(value), 0o600);
}

/**
 * The running server's side: answers each proposal of `file` as it comes,
 * with `apply` (a refusal is a sentence; undefined: applied, and `applied`
 * is told the value).
 */
export class ProposalWatcher<T> {
  private readonly proposal: string;
  private readonly listener = () => this.answer();

  constructor(
    private readonly dir: string,
    private readonly file: KeptFile<T>,
    private readonly apply: (value: T) => string | undefined,
    private readonly applied: (value: T) => void,
    /** Called after each answered proposal. */
    private readonly onAnswer: () => void = () => {},
  ) {
    this.proposal = join(dir, `${file.name}.proposed`);
    watchFile(this.proposal, { interval: PROPOSAL_POLL_MS, persistent: false }, this.listener);
    // A proposal made while the server started has no change left for the watch to see.
    this.answer();
  }

  close(): void {
    unwatchFile(this.proposal, this.listener);
  }

  /** Applies the proposed value and writes it, or writes the refusal; then removes the proposal. */
  private answer(): void {
    const text = readText(this.proposal);
    if (text === undefined) return;
    let refused: string | undefined;
    let value: T | undefined;
    try {
      value = this.file.parse(text, this.proposal);
      refused = this.apply(value);
      if (refused === undefined) writeKeptFile(this.dir, this.file, value);
    } catch (error) {
      refused = (error as Error).message;
    }
    if (refused !== undefined)
      replaceFileSync(this.dir, join(this.dir, `${this.file.name}.refused`), refused + '\n', 0o600);
    else this.applied(value!);
    removeFileSync(this.dir, this.proposal);
    this.onAnswer();
  }
}

/**
 * The command's side, while a server runs on `dir`: proposes `value` and
 * waits for the answer. Undefined once the server applied it; else the
 * sentence of its refusal. A server that does not answer in time (stopped
 * meanwhile) is a ServerCommandError, the proposal taken back.
 */
async function proposeKeptFile<T>(
  dir: string,
  file: KeptFile<T>,
  value: T,
  waitMs = ANSWER_WAIT_MS,
): Promise<string | undefined> {
  const proposal = join(dir, `${file.name}.proposed`);
  const refusal = join(dir, `${file.name}.refused`);
  removeFileSync(dir, refusal);
  replaceFileSync(dir, proposal, file.serialize(value), 0o600);
  const deadline = Date.now() + waitMs;
  while (existsSync(proposal)) {
    if (Date.now() > deadline && takeBack(dir, proposal))
      throw new ServerCommandError(
        `the server running on ${dir} did not take the change within ${waitMs / 1000} s (is it stopping?); nothing was changed: try again`,
      );
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const refused = readText(refusal);
  removeFileSync(dir, refusal);
  return refused?.trim();
}

/** Removes a proposal no server answered; false when it is gone already (answered meanwhile). */
function takeBack(dir: string, proposal: string): boolean {
  try {
    statSync(proposal);
  } catch {
    return false;
  }
  removeFileSync(dir, proposal);
  return true;
}

/** What a change of a kept file came to: changed, unchanged (nothing to do), or refused with its sentence. */
export interface KeptChange {
  readonly changed: boolean;
  readonly refused?: string | undefined;
}

/**
 * A command's change of `file` in the data directory `dir`: `edit` makes
 * the new value of the current one (undefined: no change). A server
 * running on the directory holds the users, and makes the change itself;
 * without one, the command holds the directory's lock, checks the users
 * with `refusal` and writes the file.
 */
export function changeKeptFile<T>(
  dir: string,
  file: KeptFile<T>,
  edit: (current: T) => T | undefined,
  refusal: (current: T, next: T, users: UsersOnDisk) => string | undefined,
): Promise<KeptChange> {
  return withEditLock(dir, file.name, async () => {
    const current = readKeptFile(dir, file);
    const next = edit(current);
    if (next === undefined) return { changed: false };
    const release = lockIfIdle(dir);
    let refused: string | undefined;
    if (release === undefined) refused = await proposeKeptFile(dir, file, next);
    else {
      try {
        refused = refusal(current, next, readJournalData(dir, Date.now()).users);
        if (refused === undefined) writeKeptFile(dir, file, next);
      } finally {
        release();
      }
    }
    return { changed: refused === undefined, refused };
  });
}
