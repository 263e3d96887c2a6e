/**
 * `<data>/schema`: the schema of the users' fields of a data directory
 * (users/user-schema.ts), for the memory and journal stores, a kept file
 * (store/proposed-file.ts: written by what holds the users, proposed by
 * `users-server schema set`). JSON:
 *
 *   {"format":1,"checkedExisting":true,"schema":{...}}
 *
 * `"schema":null` (or no file): none is set.
 */
import { join } from 'node:path';
import { DataError } from '../errors.js';
import { SchemaRefusedError } from '../users/json-schema/compile-schema.js';
import { UserSchema, type SchemaSetting } from '../users/user-schema.js';
import { parseKeptJson, ProposalWatcher, readKeptFile, type KeptFile } from './proposed-file.js';

export const SCHEMA_FILE = 'schema';
const FORMAT = 1;

export const SCHEMA: KeptFile<SchemaSetting | null> = {
  name: SCHEMA_FILE,
  absent: null,
  serialize(setting) {
    if (setting === null) return `{"format":${FORMAT},"schema":null}\n`;
    const schema = JSON.stringify(setting.document, null, 2);
    return `{"format":${FORMAT},"checkedExisting":${setting.checkedExisting},"schema":${schema}}\n`;
  },
  parse(text, path) {
    const { checkedExisting, schema } = parseKeptJson(text, path, FORMAT, 'a schema file');
    if (schema === null) return null;
    if (schema === undefined || typeof checkedExisting !== 'boolean')
      throw new DataError(`${path}: a schema file holds "schema" and "checkedExisting"`);
    return { document: schema, checkedExisting };
  },
};

/** The schema of a setting, compiled; a schema this users-server cannot apply is a DataError naming `where`. */
function compiledSchema(setting: SchemaSetting | null, where: string): UserSchema | undefined {
  if (setting === null) return undefined;
  try {
    return new UserSchema(setting);
  } catch (error) {
    if (!(error instanceof SchemaRefusedError)) throw error;
    throw new DataError(`${where}: the schema is refused: ${error.message}`);
  }
}

/**
 * What a store does with a schema: sets it, with `checkUsers` checked against every user first; a refusal is a
 * sentence.
 */
type SetSchema = (schema: UserSchema | undefined, checkUsers: boolean) => string | undefined;

/**
 * The running server's side: sets the file's schema at start, as it is
 * (the users were checked when it was set), then answers each proposal,
 * checked against the users, as it comes.
 */
export class SchemaWatcher {
  private readonly watcher: ProposalWatcher<SchemaSetting | null>;

  constructor(dir: string, set: SetSchema, log: (line: string) => void) {
    set(compiledSchema(readKeptFile(dir, SCHEMA), join(dir, SCHEMA_FILE)), false);
    this.watcher = new ProposalWatcher(
      dir,
      SCHEMA,
      (setting) => set(compiledSchema(setting, 'the proposed schema'), true),
      (setting) => log(`users-server: the schema of the users' fields ${setting === null ? 'was removed' : 'changed'}`),
    );
  }

  close(): void {
    this.watcher.close();
  }
}
