/**
 * Paths into a user (API.md "Finding users"): dotted member names, as the
 * filter and `sort` write them, and the one way a member is read, so that
 * filtering, sorting and indexing see the same member.
 */
import { USER_PATH } from '../../shared/user.js';

/** The path grammar in words, for the sentence that refuses a path. */
export const PATH_RULE = 'a path is names joined by dots, each a letter or `_`, then letters, digits, `_` or `-`';

/** The names of a dotted path, or undefined when `text` is not a path. */
export function parsePath(text: string): string[] | undefined {
  return USER_PATH.test(text) ? text.split('.') : undefined;
}

/**
 * The member `name` of a JSON object, or undefined when `value` is not an
 * object (an array included) or has no such own member: a name such as
 * `constructor` never reaches the prototype.
 */
export function memberOf(value: unknown, name: string): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return Object.hasOwn(value, name) ? (value as Record<string, unknown>)[name] : undefined;
}

/** The values at `path` from `root`, arrays entered at every step and at the end; a missing member is undefined. */
export function valuesAt(root: unknown, path: readonly string[]): unknown[] {
  let values: unknown[] = [root];
  for (const name of path) {
    const next: unknown[] = [];
    for (const value of values) collectMembers(value, name, next);
    values = next;
  }
  const out: unknown[] = [];
  for (const value of values) collectElements(value, out);
  return out;
}

function collectMembers(value: unknown, name: string, out: unknown[]): void {
  if (Array.isArray(value)) for (const element of value) collectMembers(element, name, out);
  else out.push(memberOf(value, name));
}

function collectElements(value: unknown, out: unknown[]): void {
  if (Array.isArray(value)) for (const element of value) collectElements(element, out);
  else out.push(value);
}
