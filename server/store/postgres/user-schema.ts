/**
 * The schema of the users' fields on PostgreSQL (users/user-schema.ts):
 * one row of `user_schema`, shared by every instance. Its changes raise
 * `field_version` as a change of declarations does (declared-fields.ts),
 * so every write checks the schema that holds at its commit, and every
 * instance reads a change within its poll of half a second.
 */
import { UserSchema, type SchemaSetting } from '../../users/user-schema.js';
import type { KeptChange } from '../proposed-file.js';
import { changeWritesRead } from './writes-read.js';
import type { Sql, TransactionSql } from './driver.js';

/** The schema a database holds, as it was set; null: none. */
export async function readSchemaSetting(sql: Sql | TransactionSql): Promise<SchemaSetting | null> {
  const [row] = await sql`select document, checked_existing from user_schema`;
  return row === undefined ? null : settingOfRow(row);
}

/** The setting of a row of user_schema. */
export function settingOfRow(row: Record<string, unknown>): SchemaSetting {
  return { document: JSON.parse(row.document as string) as unknown, checkedExisting: row.checked_existing as boolean };
}

/**
 * Sets the schema to what `edit` makes of the current one (null: none;
 * undefined: no change), holding writes of users off while every user is
 * checked against it (unless it is set with `--check-existing no`).
 */
export function changeSchema(
  sql: Sql,
  edit: (current: SchemaSetting | null) => SchemaSetting | null | undefined,
): Promise<KeptChange> {
  return changeWritesRead(sql, readSchemaSetting, edit, async (tx, _current, next, users) => {
    const refused = next === null ? undefined : new UserSchema(next).refusalOver(users);
    if (refused !== undefined) return refused;
    await writeSchema(tx, next);
    return undefined;
  });
}

/** Replaces the row of user_schema with `setting`'s (null: none). */
export async function writeSchema(tx: Sql | TransactionSql, setting: SchemaSetting | null): Promise<void> {
  await tx`delete from user_schema`;
  if (setting !== null)
    await tx`insert into user_schema (document, checked_existing) values (${JSON.stringify(setting.document)}, ${setting.checkedExisting})`;
}
