/**
 * The fields of `usersctl set` as a JSON merge patch (RFC 7396), in
 * HTTPie's syntax: `FIELD=VALUE` sets a string, `FIELD:=JSON` any JSON
 * value, `--unset FIELD` removes the member; a dotted FIELD
 * (`address.city=Oslo`) reaches into nested objects, which the merge keeps.
 */
import { jsonErrorReason } from '../shared/json-position.js';
import { USER_PATH } from '../shared/user.js';
import { CliUsageError } from './exit-codes.js';

type Patch = Record<string, unknown>;

/** The merge patch of `assignments` (`FIELD=VALUE`, `FIELD:=JSON`) and `unset` (FIELDs). */
export function assignmentsPatch(assignments: readonly string[], unset: readonly string[]): Patch {
  const patch: Patch = {};
  for (const text of assignments) {
    const { path, value } = parseAssignment(text);
    setAt(patch, path, value, text);
  }
  for (const path of unset) setAt(patch, checkedPath(path, `--unset ${path}`), null, `--unset ${path}`);
  if (Object.keys(patch).length === 0)
    throw new CliUsageError('give at least one FIELD=VALUE, FIELD:=JSON or --unset FIELD');
  return patch;
}

function parseAssignment(text: string): { path: string[]; value: unknown } {
  const equals = text.indexOf('=');
  if (equals <= 0)
    throw new CliUsageError(
      `${JSON.stringify(text)} is not FIELD=VALUE or FIELD:=JSON (for example name=Alice, age:=30)`,
    );
  const json = text[equals - 1] === ':';
  const field = text.slice(0, json ? equals - 1 : equals);
  const raw = text.slice(equals + 1);
  const path = checkedPath(field, text);
  if (!json) return { path, value: raw };
  try {
    return { path, value: JSON.parse(raw) };
  } catch (error) {
    throw new CliUsageError(
      `${field}:= takes JSON, and ${JSON.stringify(raw)} is not (${jsonErrorReason(error)}); quote a string as ${field}=TEXT`,
    );
  }
}

function checkedPath(field: string, text: string): string[] {
  if (!USER_PATH.test(field))
    throw new CliUsageError(
      `${JSON.stringify(text)}: ${JSON.stringify(field)} is not a field path (names of letters, digits, _ and -, joined by dots)`,
    );
  return field.split('.');
}

/** Puts `value` at `path` in `patch`, refusing two assignments that overlap (`a=1 a.b=2`). */
function setAt(patch: Patch, path: readonly string[], value: unknown, text: string): void {
  let object = patch;
  for (const name of path.slice(0, -1)) {
    const inner = Object.hasOwn(object, name) ? object[name] : undefined;
    if (inner !== undefined && (typeof inner !== 'object' || inner === null || Array.isArray(inner)))
      throw new CliUsageError(`${JSON.stringify(text)} overlaps an earlier field: give each field once`);
    object = (inner as Patch | undefined) ?? define(object, name, {});
  }
  const last = path[path.length - 1]!;
  if (Object.hasOwn(object, last))
    throw new CliUsageError(`${JSON.stringify(text)} sets a field already given: give each field once`);
  define(object, last, value);
}

/** Sets an own member, also `__proto__`, which plain assignment would not. */
function define<T>(object: Patch, name: string, value: T): T {
  Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
  return value;
}
