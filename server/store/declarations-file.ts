/**
 * `<data>/indexes`: the declared fields of a data directory (API.md
 * "Declared fields"), for the memory and journal stores. JSON, one field a
 * line:
 *
 *   {"format":1,"indexes":[
 *   {"path":"email","unique":true,"caseInsensitive":true}
 *   ]}
 *
 * Mode 0600, replaced atomically. Only what holds the users writes it, once
 * the users fit the declarations: the server running on the directory, or
 * the index command while no server runs (holding the directory's lock).
 * A command asks a running server by writing what it wants to
 * `<data>/indexes.proposed`; the server declares it (building the indexes,
 * checking uniqueness) and writes `indexes`, or refuses it and writes why
 * to `<data>/indexes.refused`, then removes the proposal: its removal is
 * the answer. The server looks every DECLARATIONS_POLL_MS.
 */
import { existsSync, readFileSync, statSync, unwatchFile, watchFile } from 'node:fs';
import { join } from 'node:path';
import { DataError, ServerCommandError } from '../errors.js';
import { removeFileSync, replaceFileSync } from '../ops/durable-files.js';
import { checkDeclarations, type FieldDeclaration } from '../users/declared-fields.js';

export const DECLARATIONS_FILE = 'indexes';
const PROPOSAL_FILE = 'indexes.proposed';
const REFUSAL_FILE = 'indexes.refused';
const FORMAT = 1;
/** How often a running server looks for a proposal: a stat on the thread pool, off the request path. */
const DECLARATIONS_POLL_MS = 250;
/** How long a command waits for a running server to answer its proposal. */
const ANSWER_WAIT_MS = 30_000;

/** The file's text: one declaration a line, so a diff of two versions reads well. */
function serializeDeclarations(fields: readonly FieldDeclaration[]): string {
  const lines = fields.map((f) =>
    JSON.stringify({ path: f.path, unique: f.unique, caseInsensitive: f.caseInsensitive }),
  );
  return `{"format":${FORMAT},"indexes":[\n${lines.join(',\n')}${lines.length > 0 ? '\n' : ''}]}\n`;
}

/** The declarations in a file's text; throws DataError naming what is wrong. */
function parseDeclarations(text: string, path: string): FieldDeclaration[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new DataError(`${path}: not valid JSON`);
  }
  const format = (doc as { format?: unknown } | null)?.format;
  if (format !== FORMAT) throw new DataError(`${path}: not a declarations file of format ${FORMAT}`);
  const fields = checkDeclarations((doc as { indexes?: unknown }).indexes);
  if (typeof fields === 'string') throw new DataError(`${path}: ${fields}`);
  return fields;
}

function readFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new DataError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** The declared fields of the data directory `dir`: none without the file. Throws DataError. */
export function readDeclarationsFile(dir: string): FieldDeclaration[] {
  const path = join(dir, DECLARATIONS_FILE);
  const text = readFile(path);
  return text === undefined ? [] : parseDeclarations(text, path);
}

/** Replaces `<dir>/indexes` atomically and durably. */
export function writeDeclarationsFile(dir: string, fields: readonly FieldDeclaration[]): void {
  replaceFileSync(dir, join(dir, DECLARATIONS_FILE), serializeDeclarations(fields), 0o600);
}

/** What a store does with declarations: builds their indexes, or refuses them with a sentence. */
type Declare = (fields: readonly FieldDeclaration[]) => string | undefined;

/**
 * The running server's side: declares the file's fields at start (a
 * refusal stops the start: the users break a unique field), then answers
 * each proposal as it comes.
 */
export class DeclarationsWatcher {
  private readonly proposal: string;
  private readonly listener = () => this.answer();

  constructor(
    private readonly dir: string,
    private readonly declare: Declare,
    private readonly log: (line: string) => void,
    /** Called after each answered proposal. */
    private readonly onAnswer: () => void = () => {},
  ) {
    const refused = declare(readDeclarationsFile(dir));
    if (refused !== undefined)
      throw new DataError(
        `${join(dir, DECLARATIONS_FILE)}: ${refused}; remove the field with users-server index remove, or make the values unique`,
      );
    this.proposal = join(dir, PROPOSAL_FILE);
    watchFile(this.proposal, { interval: DECLARATIONS_POLL_MS, persistent: false }, this.listener);
    // A proposal made while the server started has no change left for the watch to see.
    this.answer();
  }

  close(): void {
    unwatchFile(this.proposal, this.listener);
  }

  /** Declares the proposed fields and writes them, or writes the refusal; then removes the proposal. */
  private answer(): void {
    const text = readFile(this.proposal);
    if (text === undefined) return;
    let refused: string | undefined;
    try {
      const fields = parseDeclarations(text, this.proposal);
      refused = this.declare(fields);
      if (refused === undefined) writeDeclarationsFile(this.dir, fields);
    } catch (error) {
      refused = (error as Error).message;
    }
    if (refused !== undefined) replaceFileSync(this.dir, join(this.dir, REFUSAL_FILE), refused + '\n', 0o600);
    else this.log(`users-server: declared fields changed: ${describeFields(readDeclarationsFile(this.dir))}`);
    removeFileSync(this.dir, this.proposal);
    this.onAnswer();
  }
}

/** The declarations in a few words, for a log line. */
export function describeFields(fields: readonly FieldDeclaration[]): string {
  if (fields.length === 0) return 'none';
  const flags = (f: FieldDeclaration) =>
    [f.unique && 'unique', f.caseInsensitive && 'case-insensitive'].filter(Boolean).join(', ');
  return fields.map((f) => (flags(f) === '' ? f.path : `${f.path} (${flags(f)})`)).join(', ');
}

/**
 * The command's side, while a server runs on `dir`: proposes `fields` and
 * waits for the answer. Undefined once the server declared them; else the
 * sentence of its refusal. A server that does not answer in time
 * (stopped meanwhile) is a ServerCommandError, the proposal taken back.
 */
export async function proposeDeclarations(
  dir: string,
  fields: readonly FieldDeclaration[],
  waitMs = ANSWER_WAIT_MS,
): Promise<string | undefined> {
  const proposal = join(dir, PROPOSAL_FILE);
  const refusal = join(dir, REFUSAL_FILE);
  removeFileSync(dir, refusal);
  replaceFileSync(dir, proposal, serializeDeclarations(fields), 0o600);
  const deadline = Date.now() + waitMs;
  while (existsSync(proposal)) {
    if (Date.now() > deadline && takeBack(dir, proposal))
      throw new ServerCommandError(
        `the server running on ${dir} did not take the change within ${waitMs / 1000} s (is it stopping?); nothing was changed: try again`,
      );
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const refused = readFile(refusal);
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
