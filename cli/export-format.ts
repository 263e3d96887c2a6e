/**
 * The format of `usersctl export`, which `import` reads back: a header
 * line, one record a user, then an end record with the count, written
 * only once the last user is out, so that an export cut short (Ctrl-C, a
 * full disk, a lost connection) does not pass for a whole one.
 * docs/cli.md "Export and import".
 */
import { isId } from '../shared/user.js';

/**
 * The first line of an export: what `import` recognises an export by. It
 * holds nothing that changes from run to run, so exporting what an import
 * of an export rebuilt gives the same bytes.
 */
export const EXPORT_HEADER = '{"usersctl":"export","version":2}';
/** The header of an export made before exports ended with an end record: imported as it is, with no end looked for. */
export const EXPORT_HEADER_V1 = '{"usersctl":"export","version":1}';

/** The last line of a whole export of `users` users. */
export function endRecord(users: number): string {
  return `{"usersctl":"end","users":${users}}`;
}

/** The count of an end record, or undefined for any other value. */
export function endRecordUsers(value: unknown): number | undefined {
  const end = value as { usersctl?: unknown; users?: unknown };
  if (typeof value !== 'object' || value === null || end.usersctl !== 'end') return undefined;
  return Number.isSafeInteger(end.users) && (end.users as number) >= 0 ? (end.users as number) : undefined;
}

/** An export's record: a user's id, alias and representation. */
export interface ExportRecord {
  id: number;
  alias: string | null;
  user: Record<string, unknown>;
}

/** The record of an export line, or why the line is not one. */
export function parseRecord(value: unknown): ExportRecord | string {
  const r = value as Partial<ExportRecord>;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'a record of an export must be a JSON object';
  if (!isId(r.id)) return 'a record of an export needs "id", a user id';
  if (r.alias !== null && typeof r.alias !== 'string') return 'a record\'s "alias" must be a string or null';
  if (typeof r.user !== 'object' || r.user === null || Array.isArray(r.user))
    return 'a record needs "user", the user as a JSON object';
  if (r.user.id !== r.id) return 'a record\'s "user" must carry the record\'s "id"';
  return r as ExportRecord;
}
