/**
 * JSON Merge Patch (RFC 7396): applying a patch to a document, and the patch
 * that turns one document into another. The server applies PATCH bodies
 * with it; usersctl builds patches with it (`set`, and `edit` re-applying a
 * person's change onto a newer version).
 */

/** RFC 7396's media type, which PATCH /users/{ref} takes. */
export const MERGE_PATCH_TYPE = 'application/merge-patch+json';

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `target` with `patch` merged in (RFC 7396 section 2): an object patch
 * merges member by member, `null` removes a member, anything else
 * (arrays included) replaces. Neither argument is changed.
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: JsonObject = isObject(target) ? { ...target } : {};
  for (const name of Object.keys(patch)) {
    const value = patch[name];
    if (value === null) delete result[name];
    else defineMember(result, name, isObject(value) ? applyMergePatch(result[name], value) : value);
  }
  return result;
}

/** Sets `name` as an own member, also `__proto__`, which plain assignment would give the object as its prototype. */
function defineMember(object: JsonObject, name: string, value: unknown): void {
  if (name !== '__proto__') object[name] = value;
  else Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The merge patch that turns `from` into `to`, or undefined when they are
 * equal. A member that `to` holds as `null` comes out removed: a merge
 * patch cannot say `null` (RFC 7396 section 1).
 */
export function mergePatchBetween(from: unknown, to: unknown): unknown {
  if (sameJson(from, to)) return undefined;
  if (!isObject(from) || !isObject(to)) return to;
  const patch: JsonObject = {};
  for (const name of Object.keys(from)) if (!Object.hasOwn(to, name)) defineMember(patch, name, null);
  for (const [name, value] of Object.entries(to)) {
    const member = Object.hasOwn(from, name) ? mergePatchBetween(from[name], value) : value;
    if (member !== undefined) defineMember(patch, name, member);
  }
  return patch;
}

/** Equal JSON values: numbers by value, objects whatever their members' order. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const names = Object.keys(a);
  return names.length === Object.keys(b).length && names.every((n) => Object.hasOwn(b, n) && sameJson(a[n], b[n]));
}
