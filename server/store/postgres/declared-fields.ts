/**
 * Declared fields on PostgreSQL (API.md "Declared fields"): the
 * declarations in `field_declarations`, shared by every instance, and
 * their indexes as rows, `index_entries` (every key a user holds, kind
 * 'e', and its sort key, kind 's') and `unique_values` (the keys of unique
 * fields, primary key path and key: of two transactions that write one
 * value, the second fails and, run again, finds the first's). Keys are
 * users/index-key.ts's, computed here in JavaScript, as the memory store
 * computes them.
 *
 * `field_version` counts the changes of declarations. Every write of a
 * user locks `users` (row exclusive) and reads the version in its
 * transaction; a change of declarations locks `users` against writes
 * (share row exclusive) while it builds the entries, and raises it. So a
 * write sees the declarations that hold at its commit, whatever its
 * instance had read before.
 */
import {
  declarationRefusal,
  fieldKeysOf,
  namesOf,
  sameDeclaration,
  uniqueConflict,
  uniqueKeysOf,
  type FieldDeclaration,
  type UniqueKey,
} from '../../users/declared-fields.js';
import { isDeepStrictEqual } from 'node:util';
import { sortKeyOf } from '../../users/index-key.js';
import { UserSchema } from '../../users/user-schema.js';
import { settingOfRow } from './user-schema.js';
import type { UniqueViolation } from '../../users/rules.js';
import type { Sql, TransactionSql } from './driver.js';
import { changeWritesRead } from './writes-read.js';
import type { KeptChange } from '../proposed-file.js';

/** What runs a statement: the pool, or a transaction's connection. */
type Statements = Sql | TransactionSql;

/** How often an instance asks whether the declarations changed. */
const FIELDS_POLL_MS = 500;
/** Entry rows written in one statement. */
const BATCH = 5000;

/** A read of an index found the declarations changed since this instance read them: read them again and ask again. */
export class FieldsChangedError extends Error {
  override readonly name = 'FieldsChangedError';
}

/** What every write reads of the declarations: the declared fields and the schema of the users' fields. */
export interface WritesRead {
  readonly fields: readonly FieldDeclaration[];
  /** Undefined: no schema is set. */
  readonly schema: UserSchema | undefined;
}

/**
 * The declarations as this instance knows them (the declared fields and
 * the schema, whose changes `field_version` counts alike), and the version
 * of them it read.
 */
export class DeclaredFields {
  version = -1;
  list: readonly FieldDeclaration[] = [];
  schema: UserSchema | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly sql: Sql) {}

  /**
   * Reads the declarations and their version, in one statement of one row.
   * Its tables hold a row or a few and are never analyzed: a join of them
   * is planned as millions of rows, and its compilation (PostgreSQL's JIT)
   * costs the database a quarter of a second a read. Each subquery is
   * planned alone, cheap.
   */
  async load(sql: Statements = this.sql): Promise<void> {
    const [row] = await sql`
      select (select version from field_version) as version,
        (select document from user_schema) as document,
        (select checked_existing from user_schema) as checked_existing,
        (select json_agg(json_build_object('path', path, 'is_unique', is_unique, 'case_insensitive', case_insensitive)
          order by path collate "C") from field_declarations) as fields`;
    this.schema = schemaOfRow(row!, this.schema);
    this.version = Number(row!.version);
    this.list = ((row!.fields as Record<string, unknown>[] | null) ?? []).map(declarationOfRow);
  }

  /** Reads them again every FIELDS_POLL_MS while the store is open, when their version moved. */
  poll(): void {
    this.timer = setInterval(() => void this.refresh().catch(() => {}), FIELDS_POLL_MS);
    this.timer.unref();
  }

  async refresh(): Promise<void> {
    const [row] = await this.sql`select version from field_version`;
    if (Number(row!.version) !== this.version) await this.load();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /**
   * In a write's transaction, before it decides: `users` locked against a
   * change of declarations until the commit, and the declarations read
   * again when they changed. The statements are made at once.
   */
  async lockIn(tx: Statements): Promise<WritesRead> {
    const [, [row]] = await Promise.all([
      tx`lock table users in row exclusive mode`,
      tx`select version from field_version`,
    ]);
    if (Number(row!.version) !== this.version) await this.load(tx);
    return { fields: this.list, schema: this.schema };
  }

  /** Throws FieldsChangedError when an index read saw another version than this instance's. */
  checkVersion(version: unknown): void {
    if (Number(version) !== this.version) throw new FieldsChangedError('the declared fields changed');
  }
}

/** The schema a row of user_schema holds (null columns: none), compiled again only when it changed from `known`'s. */
function schemaOfRow(row: Record<string, unknown>, known: UserSchema | undefined): UserSchema | undefined {
  if (row.document === null) return undefined;
  const setting = settingOfRow(row);
  if (known !== undefined && isDeepStrictEqual(known.setting, setting)) return known;
  return new UserSchema(setting);
}

function declarationOfRow(row: Record<string, unknown>): FieldDeclaration {
  return {
    path: row.path as string,
    unique: row.is_unique as boolean,
    caseInsensitive: row.case_insensitive as boolean,
  };
}

// ------------------------------------------------------------ a write's rows

interface EntryRow {
  path: string;
  kind: 'e' | 's';
  key: string;
  user_id: number;
}

/** The rows of index_entries, and of unique_values for the unique fields, of users' versions. */
function rowsOf(fields: readonly FieldDeclaration[], versions: readonly IndexedVersion[]) {
  const entries = versions.flatMap((v) => entryRows(fields, v.id, v.json));
  const unique = new Set(fields.filter((f) => f.unique).map((f) => f.path));
  const uniques = entries
    .filter((r) => r.kind === 'e' && unique.has(r.path))
    .map(({ path, key, user_id }) => ({ path, key, user_id }));
  return { entries, uniques };
}

/** The index_entries rows of the version `json` of the user `id`. */
function entryRows(fields: readonly FieldDeclaration[], id: number, json: string): EntryRow[] {
  const user: unknown = JSON.parse(json);
  return fields.flatMap((field) => [
    { path: field.path, kind: 's' as const, key: sortKeyOf(user, namesOf(field), field.caseInsensitive), user_id: id },
    ...fieldKeysOf(user, field).map((key) => ({ path: field.path, kind: 'e' as const, key, user_id: id })),
  ]);
}

/** A user's version as a write gives it to the index. */
export interface IndexedVersion {
  readonly id: number;
  readonly json: string;
}

/**
 * The statements that give `versions` their entries: the old ones of those
 * users removed (a delete of a user removes its own, by cascade), the new
 * ones inserted, the keys of unique fields among them. As JSON text: one
 * parameter however many rows.
 */
export function writeEntries(tx: Statements, fields: readonly FieldDeclaration[], versions: readonly IndexedVersion[]) {
  if (fields.length === 0 || versions.length === 0) return [];
  const ids = JSON.stringify(versions.map((v) => v.id));
  const { entries, uniques } = rowsOf(fields, versions);
  const byIds = tx`(select jsonb_array_elements_text(${ids}::text::jsonb)::bigint)`;
  return [
    tx`delete from index_entries where user_id in ${byIds}`,
    tx`delete from unique_values where user_id in ${byIds}`,
    ...insertEntries(tx, entries),
    ...insertUniques(tx, uniques),
  ];
}

function insertEntries(tx: Statements, rows: readonly EntryRow[]) {
  return batches(rows).map(
    (batch) =>
      tx`insert into index_entries (path, kind, key, user_id) select * from jsonb_to_recordset(${JSON.stringify(batch)}::text::jsonb) as x(path text, kind text, key text, user_id bigint)`,
  );
}

function insertUniques(tx: Statements, rows: readonly Omit<EntryRow, 'kind'>[]) {
  return batches(rows).map(
    (batch) =>
      tx`insert into unique_values (path, key, user_id) select * from jsonb_to_recordset(${JSON.stringify(batch)}::text::jsonb) as x(path text, key text, user_id bigint)`,
  );
}

function batches<T>(rows: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += BATCH) out.push(rows.slice(i, i + BATCH));
  return out;
}

/**
 * Who holds each of `keys` now (committed), in a map by path and key: one
 * statement, none without keys.
 */
export async function holdersOf(tx: Statements, keys: readonly UniqueKey[]): Promise<Map<string, number>> {
  const holders = new Map<string, number>();
  if (keys.length === 0) return holders;
  const input = JSON.stringify(keys.map((k) => ({ path: k.field.path, key: k.key })));
  const rows = await tx`
    select u.path, u.key, u.user_id from unique_values u
    join jsonb_to_recordset(${input}::text::jsonb) as x(path text, key text) on u.path = x.path and u.key = x.key`;
  for (const row of rows) holders.set(holderKey(row.path as string, row.key as string), Number(row.user_id));
  return holders;
}

function holderKey(path: string, key: string): string {
  return `${path}\n${key}`;
}

/** The refusal of `keys` for the user `self` when `holders` names another user for one of them. */
export function conflictIn(keys: readonly UniqueKey[], self: number, holders: ReadonlyMap<string, number>) {
  return uniqueConflict(keys, self, (k) => {
    const holder = holders.get(holderKey(k.field.path, k.key));
    return holder === undefined ? [] : [holder];
  });
}

/** Records in `holders` that `id` holds `keys` now (a create decided earlier in the same transaction). */
export function hold(holders: Map<string, number>, keys: readonly UniqueKey[], id: number): void {
  for (const k of keys) holders.set(holderKey(k.field.path, k.key), id);
}

/** The refusal of writing `json` as the user `self` when another user holds one of its unique values; one statement. */
export async function takenIn(
  tx: Statements,
  fields: readonly FieldDeclaration[],
  json: string,
  self: number,
): Promise<UniqueViolation | undefined> {
  if (!fields.some((f) => f.unique)) return undefined;
  const keys = uniqueKeysOf(JSON.parse(json), fields);
  return conflictIn(keys, self, await holdersOf(tx, keys));
}

// ------------------------------------------------------------ changing the declarations

/**
 * Changes the declarations to what `edit` makes of them (undefined: no
 * change), holding writes of users off: checked against every user (a
 * field made unique over values two hold is refused), the entries of each
 * new or changed field built, those of a removed one dropped.
 */
export function changeDeclarations(
  sql: Sql,
  edit: (fields: readonly FieldDeclaration[]) => FieldDeclaration[] | undefined,
): Promise<KeptChange> {
  return changeWritesRead(sql, readDeclarations, edit, async (tx, current, next, users) => {
    const refused = declarationRefusal(current, next, users);
    if (refused !== undefined) return refused;
    const kept = (f: FieldDeclaration) => current.some((c) => sameDeclaration(c, f));
    const stale = JSON.stringify(current.filter((c) => !next.some((f) => sameDeclaration(c, f))).map((c) => c.path));
    await tx`delete from index_entries where path in (select jsonb_array_elements_text(${stale}::text::jsonb))`;
    await tx`delete from unique_values where path in (select jsonb_array_elements_text(${stale}::text::jsonb))`;
    await tx`delete from field_declarations`;
    for (const f of next)
      await tx`insert into field_declarations (path, is_unique, case_insensitive) values (${f.path}, ${f.unique}, ${f.caseInsensitive})`;
    await buildEntries(
      tx,
      next.filter((f) => !kept(f)),
      users,
    );
    return undefined;
  });
}

/** Inserts the entries of `fields` for every one of `users`, a batch of users at a time. */
export async function buildEntries(
  tx: Statements,
  fields: readonly FieldDeclaration[],
  users: readonly IndexedVersion[],
) {
  if (fields.length === 0) return;
  for (let i = 0; i < users.length; i += BATCH) {
    const { entries, uniques } = rowsOf(fields, users.slice(i, i + BATCH));
    await Promise.all([...insertEntries(tx, entries), ...insertUniques(tx, uniques)]);
  }
}

/** The declarations a database holds, for a command. */
export async function readDeclarations(sql: Statements): Promise<FieldDeclaration[]> {
  return (await sql`select path, is_unique, case_insensitive from field_declarations order by path collate "C"`).map(
    declarationOfRow,
  );
}
