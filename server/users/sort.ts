/**
 * The `sort` of `GET /users?sort=` (API.md "Sort"): its parser, the values a
 * user sorts on, and the one order every store pages in. Ascending, present
 * values come as numbers (by value), strings (by code points, lowercased on
 * a case-insensitive path), `false`, `true`; a member that is missing,
 * `null`, an array or an object comes after them in both directions; `-`
 * reverses the present values only; ties go by ascending id.
 */
import { compareCodePoints } from './code-points.js';
import { memberOf, parsePath, PATH_RULE } from './user-path.js';

export const MAX_SORT_KEYS = 4;

export interface SortKey {
  readonly path: readonly string[];
  readonly descending: boolean;
}

export type SortParse =
  { readonly ok: true; readonly keys: SortKey[] } | { readonly ok: false; readonly detail: string };

/** The value a user sorts on at one key; null stands for every member that sorts last. */
export type SortValue = number | string | boolean | null;

/** A user's place in a sorted listing: its sort values (one per key) and its id. */
export interface SortEntry {
  readonly id: number;
  readonly values: readonly SortValue[];
}

/**
 * Parses `sort`: comma-separated paths, each optionally after `-`. A failure says what is wrong, for `invalid-query`.
 */
export function parseSort(text: string): SortParse {
  const parts = text.split(',');
  if (parts.length > MAX_SORT_KEYS)
    return { ok: false, detail: `sort has ${parts.length} keys: at most ${MAX_SORT_KEYS} are allowed` };
  const keys: SortKey[] = [];
  const seen = new Set<string>();
  for (const [i, part] of parts.entries()) {
    const descending = part.startsWith('-');
    const pathText = descending ? part.slice(1) : part;
    const path = parsePath(pathText);
    const which = parts.length === 1 ? 'sort' : `sort key ${i + 1}`;
    if (path === undefined) return { ok: false, detail: `${which} is not a path, or \`-\` and a path: ${PATH_RULE}` };
    if (seen.has(pathText)) return { ok: false, detail: `${which} names the path \`${pathText}\` a second time` };
    seen.add(pathText);
    keys.push({ path, descending });
  }
  return { ok: true, keys };
}

/** The canonical text of parsed sort keys: `parseSort(printSort(keys))` gives them back. */
export function printSort(keys: readonly SortKey[]): string {
  return keys.map((k) => `${k.descending ? '-' : ''}${k.path.join('.')}`).join(',');
}

/** The values `user` sorts on, one per key: built once per user, then compared with compareSortEntries. */
export function sortValuesOf(
  user: unknown,
  keys: readonly SortKey[],
  caseInsensitivePaths: ReadonlySet<string>,
): SortValue[] {
  return keys.map((key) => {
    const value = sortValueAt(user, key.path);
    return typeof value === 'string' && caseInsensitivePaths.has(key.path.join('.')) ? value.toLowerCase() : value;
  });
}

/** The member at `path` through nested objects; an array on the way, or at the end, sorts last. */
export function sortValueAt(user: unknown, path: readonly string[]): SortValue {
  let value = user;
  for (const name of path) value = memberOf(value, name);
  return typeof value === 'number' || typeof value === 'string' || typeof value === 'boolean' ? value : null;
}

/** The ascending order of sort values: numbers, strings, false, true, then null. */
export function compareSortValues(a: SortValue, b: SortValue): number {
  if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1;
  const byRank = rankOf(a) - rankOf(b);
  if (byRank !== 0) return Math.sign(byRank);
  if (typeof a === 'number') return Math.sign(a - (b as number));
  if (typeof a === 'string') return compareCodePoints(a, b as string);
  return 0;
}

function rankOf(value: number | string | boolean): number {
  return typeof value === 'number' ? 0 : typeof value === 'string' ? 1 : value ? 3 : 2;
}

/** The listing's order of two users, by their entries for `keys`: each key in its direction, nulls last, then id. */
export function compareSortEntries(a: SortEntry, b: SortEntry, keys: readonly SortKey[]): number {
  for (const [i, key] of keys.entries()) {
    const x = a.values[i] ?? null;
    const y = b.values[i] ?? null;
    const order = compareSortValues(x, y);
    if (order !== 0) return key.descending && x !== null && y !== null ? -order : order;
  }
  return Math.sign(a.id - b.id);
}
