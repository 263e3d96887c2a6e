/**
 * Paths into a user (API.md "Finding users"): dotted member names, as the
 * filter and `sort` write them, and the one way a member is read, so that
 * filtering and sorting see the same member.
 */
import { USER_PATH } from '../../shared/user.js';

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
