/**
 * `<data>/indexes`: the declared fields of a data directory (API.md
 * "Declared fields"), for the memory and journal stores, a kept file
 * (store/proposed-file.ts: written by what holds the users, proposed by
 * `users-server index`). JSON, one field a line:
 *
 *   {"format":1,"indexes":[
 *   {"path":"email","unique":true,"caseInsensitive":true}
 *   ]}
 */
import { join } from 'node:path';
import { DataError } from '../errors.js';
import { checkDeclarations, type FieldDeclaration } from '../users/declared-fields.js';
import { parseKeptJson, ProposalWatcher, readKeptFile, writeKeptFile, type KeptFile } from './proposed-file.js';

export const DECLARATIONS_FILE = 'indexes';
const FORMAT = 1;

/** The declarations file: one declaration a line, so a diff of two versions reads well. */
export const DECLARATIONS: KeptFile<readonly FieldDeclaration[]> = {
  name: DECLARATIONS_FILE,
  absent: [],
  serialize(fields) {
    const lines = fields.map((f) =>
      JSON.stringify({ path: f.path, unique: f.unique, caseInsensitive: f.caseInsensitive }),
    );
    return `{"format":${FORMAT},"indexes":[\n${lines.join(',\n')}${lines.length > 0 ? '\n' : ''}]}\n`;
  },
  parse(text, path) {
    const doc = parseKeptJson(text, path, FORMAT, 'a declarations file');
    const fields = checkDeclarations(doc.indexes);
    if (typeof fields === 'string') throw new DataError(`${path}: ${fields}`);
    return fields;
  },
};

/** The declared fields of the data directory `dir`: none without the file. Throws DataError. */
export function readDeclarationsFile(dir: string): FieldDeclaration[] {
  return [...readKeptFile(dir, DECLARATIONS)];
}

/** Replaces `<dir>/indexes` atomically and durably. */
export function writeDeclarationsFile(dir: string, fields: readonly FieldDeclaration[]): void {
  writeKeptFile(dir, DECLARATIONS, fields);
}

/** What a store does with declarations: builds their indexes, or refuses them with a sentence. */
type Declare = (fields: readonly FieldDeclaration[]) => string | undefined;

/**
 * The running server's side: declares the file's fields at start (a
 * refusal stops the start: the users break a unique field), then answers
 * each proposal as it comes.
 */
export class DeclarationsWatcher {
  private readonly watcher: ProposalWatcher<readonly FieldDeclaration[]>;

  constructor(dir: string, declare: Declare, log: (line: string) => void, onAnswer?: () => void) {
    const refused = declare(readDeclarationsFile(dir));
    if (refused !== undefined)
      throw new DataError(
        `${join(dir, DECLARATIONS_FILE)}: ${refused}; remove the field with users-server index remove, or make the values unique`,
      );
    this.watcher = new ProposalWatcher(
      dir,
      DECLARATIONS,
      declare,
      (fields) => log(`users-server: declared fields changed: ${describeFields(fields)}`),
      onAnswer,
    );
  }

  close(): void {
    this.watcher.close();
  }
}

/** The declarations in a few words, for a log line. */
export function describeFields(fields: readonly FieldDeclaration[]): string {
  if (fields.length === 0) return 'none';
  const flags = (f: FieldDeclaration) =>
    [f.unique && 'unique', f.caseInsensitive && 'case-insensitive'].filter(Boolean).join(', ');
  return fields.map((f) => (flags(f) === '' ? f.path : `${f.path} (${flags(f)})`)).join(', ');
}
