/**
 * The format of `usersctl export`, which `import` reads back: a header
 * line, then one record a user. docs/cli.md "Export and import".
 */
import { isId } from '../shared/user.js';

/**
 * The first line of an export: what `import` recognises an export by. It
 * holds nothing that changes from run to run, so exporting what an import
 * of an export rebuilt gives the same bytes.
 */
export const EXPORT_HEADER = '{"usersctl":"export","version":1}';

/** An export's record: a user's id, alias and representation. */
export interface ExportRecord {
  id: number;
  alias: string | null;
  user: Record<string, unknown>;
}

/** The record of an export line, or why the line is not one. */
export function parseRecord(value: unknown): ExportRecord | string {
  const r = value as Partial<ExportRecord>;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'a record of an export must be a JSON object';
  if (!isId(r.id)) return 'a record of an export needs "id", a user id';
  if (r.alias !== null && typeof r.alias !== 'string') return 'a record\'s "alias" must be a string or null';
  if (typeof r.user !== 'object' || r.user === null || Array.isArray(r.user)) return 'a record needs "user", the user as a JSON object';
  if (r.user.id !== r.id) return 'a record\'s "user" must carry the record\'s "id"';
  return r as ExportRecord;
}
