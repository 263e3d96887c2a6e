/**
 * Declared fields (API.md "Declared fields: indexes, uniqueness, case"): the
 * paths an operator declares with `users-server index add`, which every
 * store keeps in an index, unique or case-insensitive as declared. Here is
 * the declaration, its checks, and uniqueness as pure decisions over the
 * keys of users/index-key.ts; a store finds who holds a key, these decide.
 */
import { userPath } from '../../shared/endpoints.js';
import { elementKeysOf, keyValue } from './index-key.js';
import type { UniqueViolation } from './rules.js';
import { parsePath, PATH_RULE } from './user-path.js';

export interface FieldDeclaration {
  /** Dotted, as the filter writes it (`email`, `emails.value`). */
  readonly path: string;
  /** No two users hold an equal value there. */
  readonly unique: boolean;
  /** Its strings compare lowercased (toLowerCase) in filters, sorts and uniqueness. */
  readonly caseInsensitive: boolean;
}

/** At most this many fields are declared: each one is written with every write of a user. */
export const MAX_DECLARED_FIELDS = 32;
/** The longest declared path, in characters. */
const MAX_PATH_LENGTH = 200;

type PathParse = { readonly ok: true; readonly path: string } | { readonly ok: false; readonly detail: string };

/** A path to declare, as `index add` and `index remove` take it: the filter's path grammar. */
export function parseFieldPath(text: string): PathParse {
  if (text.length > MAX_PATH_LENGTH)
    return { ok: false, detail: `a declared path has at most ${MAX_PATH_LENGTH} characters` };
  if (parsePath(text) === undefined)
    return { ok: false, detail: `${JSON.stringify(text)} is not a path: ${PATH_RULE}` };
  return { ok: true, path: text };
}

/** The declarations a file or a database holds, checked; a string says what is wrong. */
export function checkDeclarations(list: unknown): FieldDeclaration[] | string {
  if (!Array.isArray(list)) return 'the declared fields are not a list';
  if (list.length > MAX_DECLARED_FIELDS) return `${list.length} fields are declared: at most ${MAX_DECLARED_FIELDS}`;
  const fields: FieldDeclaration[] = [];
  for (const [i, entry] of list.entries()) {
    const field = declarationOf(entry);
    if (typeof field === 'string') return `declared field ${i + 1}: ${field}`;
    if (fields.some((f) => f.path === field.path)) return `the path ${field.path} is declared twice`;
    fields.push(field);
  }
  return fields;
}

function declarationOf(entry: unknown): FieldDeclaration | string {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return 'not an object';
  const { path, unique, caseInsensitive } = entry as Record<string, unknown>;
  if (typeof path !== 'string') return 'no path';
  const parsed = parseFieldPath(path);
  if (!parsed.ok) return parsed.detail;
  if (typeof unique !== 'boolean' || typeof caseInsensitive !== 'boolean')
    return `${path}: unique and caseInsensitive must be true or false`;
  return { path, unique, caseInsensitive };
}

/** `fields` with `field` declared: in place of a declaration of its path, else added; in path order. */
export function withField(fields: readonly FieldDeclaration[], field: FieldDeclaration): FieldDeclaration[] {
  return [...withoutField(fields, field.path), field].sort((a, b) => (a.path < b.path ? -1 : 1));
}

export function withoutField(fields: readonly FieldDeclaration[], path: string): FieldDeclaration[] {
  return fields.filter((f) => f.path !== path);
}

/**
 * The paths declared case-insensitive: the set the filter and the sort fold
 * (users/filter-match.ts, users/sort.ts). A store keeps one array of its
 * declarations until they change, and every find asks for its set, so the
 * set is made once per array.
 */
export function foldedPaths(fields: readonly FieldDeclaration[]): ReadonlySet<string> {
  let folded = foldedOf.get(fields);
  if (folded === undefined) {
    folded = new Set(fields.filter((f) => f.caseInsensitive).map((f) => f.path));
    foldedOf.set(fields, folded);
  }
  return folded;
}

const foldedOf = new WeakMap<readonly FieldDeclaration[], ReadonlySet<string>>();

/** The names of a declared path. */
export function namesOf(field: FieldDeclaration): readonly string[] {
  return field.path.split('.');
}

/** The keys a user holds at a declared field (users/index-key.ts). */
export function fieldKeysOf(user: unknown, field: FieldDeclaration): string[] {
  return elementKeysOf(user, namesOf(field), field.caseInsensitive);
}

// ------------------------------------------------------------ uniqueness

/** A key of a unique field that a user's version holds. */
export interface UniqueKey {
  readonly field: FieldDeclaration;
  readonly key: string;
}

/** The keys of `user` at every unique field of `fields`: what no other user may hold. */
export function uniqueKeysOf(user: unknown, fields: readonly FieldDeclaration[]): UniqueKey[] {
  return fields.filter((f) => f.unique).flatMap((field) => fieldKeysOf(user, field).map((key) => ({ field, key })));
}

/**
 * The refusal of a write of `user` as the user `self` (its id before the
 * write) when another user holds one of its unique keys; `holders` gives
 * the users that hold a key now. Users without the member hold no key, so
 * they never conflict.
 */
export function uniqueConflict(
  keys: readonly UniqueKey[],
  self: number,
  holders: (key: UniqueKey) => Iterable<number>,
): UniqueViolation | undefined {
  for (const key of keys)
    for (const holder of holders(key)) if (holder !== self) return uniqueViolation(key.field.path, holder);
  return undefined;
}

function uniqueViolation(field: string, conflictsWith: number): UniqueViolation {
  return {
    kind: 'unique-violation',
    field,
    conflictsWith,
    detail: `The user ${userPath(conflictsWith)} already holds this value of ${field}, which is declared unique: no two users may hold equal values there.`,
  };
}

/** A value held by more than one user at a field: what keeps it from being declared unique. */
interface Duplicate {
  /** As the index keeps it: lowercased on a case-insensitive field. */
  readonly value: string | number | boolean;
  readonly ids: readonly number[];
}

/** True when two declarations declare the same: one path, alike in every flag. */
export function sameDeclaration(a: FieldDeclaration, b: FieldDeclaration): boolean {
  return a.path === b.path && a.unique === b.unique && a.caseInsensitive === b.caseInsensitive;
}

/**
 * Why `next` cannot replace the declarations `previous` over `users`: a
 * field declared anew as unique (or folded otherwise) whose values two of
 * them hold, said naming the values and their users; undefined when none.
 */
export function declarationRefusal(
  previous: readonly FieldDeclaration[],
  next: readonly FieldDeclaration[],
  users: Iterable<{ readonly id: number; readonly json: string }>,
): string | undefined {
  const fresh = next.filter((f) => f.unique && !previous.some((p) => sameDeclaration(p, f)));
  if (fresh.length === 0) return undefined;
  const all = [...users];
  for (const field of fresh) {
    const duplicates = duplicatesOf(all, field);
    if (duplicates.length > 0) return describeDuplicates(field, duplicates);
  }
  return undefined;
}

/** The values of `field` that two users or more hold, among `users`. */
function duplicatesOf(users: Iterable<{ readonly id: number; readonly json: string }>, field: FieldDeclaration) {
  const holders = new Map<string, number[]>();
  for (const user of users)
    for (const key of fieldKeysOf(JSON.parse(user.json), field)) {
      const ids = holders.get(key);
      if (ids === undefined) holders.set(key, [user.id]);
      else ids.push(user.id);
    }
  const duplicates: Duplicate[] = [];
  for (const [key, ids] of holders) if (ids.length > 1) duplicates.push({ value: keyValue(key)!, ids });
  return duplicates;
}

/** How many duplicate values a refusal names; the rest are counted. */
const NAMED_DUPLICATES = 10;

/** Why `field` cannot be declared unique, naming the values taken twice and their users. */
export function describeDuplicates(field: FieldDeclaration, duplicates: readonly Duplicate[]): string {
  const named = duplicates.slice(0, NAMED_DUPLICATES).map((d) => `${JSON.stringify(d.value)} (users ${listOf(d.ids)})`);
  const more = duplicates.length - named.length;
  const rest = more > 0 ? `, and ${more} more value${more === 1 ? '' : 's'}` : '';
  const folded = field.caseInsensitive ? ' (lowercased)' : '';
  return `${field.path} cannot be unique: ${duplicates.length === 1 ? 'a value is' : `${duplicates.length} values are`} held by more than one user${folded}: ${named.join(', ')}${rest}`;
}

function listOf(ids: readonly number[]): string {
  const shown = ids.slice(0, 5).join(', ');
  return ids.length > 5 ? `${shown} and ${ids.length - 5} more` : shown;
}
