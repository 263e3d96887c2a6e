/**
 * What a filter means (API.md "The filter syntax"): the one definition,
 * over a user as parsed JSON. Every store answers a filter as `matches`
 * does; an index only finds the same users faster.
 *
 * A path reaches values: where it meets an array, at any step, it goes on
 * into every element (nested arrays too). A path that reaches no value
 * (a missing member, or only empty arrays) reaches `null`. A condition
 * holds when it holds for any value reached; `ne` is exactly `not eq`.
 */
import { compareCodePoints, containsCodePoints, endsWithCodePoints, startsWithCodePoints } from './code-points.js';
import type { CompareOp, Filter, FilterValue } from './filter-parse.js';
import { valuesAt } from './user-path.js';

/**
 * True when `user` satisfies `filter`. `caseInsensitivePaths` holds the
 * dotted paths declared case-insensitive (`emails.value` for the `value`
 * inside `emails[...]`): their string comparisons are made lowercased.
 */
export function matches(filter: Filter, user: unknown, caseInsensitivePaths: ReadonlySet<string>): boolean {
  return holds(filter, user, '', caseInsensitivePaths);
}

/** `filter` on `root`, whose paths sit under `prefix` (empty, or ending in a dot) for the case-insensitive check. */
function holds(filter: Filter, root: unknown, prefix: string, folded: ReadonlySet<string>): boolean {
  switch (filter.kind) {
    case 'or':
      return filter.operands.some((f) => holds(f, root, prefix, folded));
    case 'and':
      return filter.operands.every((f) => holds(f, root, prefix, folded));
    case 'not':
      return !holds(filter.operand, root, prefix, folded);
    case 'present':
      return reachedOrNull(root, filter.path).some(isPresent);
    case 'some': {
      const inner = `${prefix}${filter.path.join('.')}.`;
      return valuesAt(root, filter.path).some((v) => isObject(v) && holds(filter.filter, v, inner, folded));
    }
    case 'compare': {
      const lower = folded.size > 0 && folded.has(prefix + filter.path.join('.'));
      return compareHolds(filter.op, filter.value, reachedOrNull(root, filter.path), lower);
    }
  }
}

function compareHolds(op: CompareOp, value: FilterValue, reached: unknown[], lower: boolean): boolean {
  const wanted = lower && typeof value === 'string' ? value.toLowerCase() : value;
  const fold = (v: unknown) => (lower && typeof v === 'string' ? v.toLowerCase() : v);
  if (op === 'ne') return !reached.some((v) => isEqual(fold(v), wanted));
  return reached.some((v) => compareOne(op, fold(v), wanted));
}

function compareOne(op: CompareOp, member: unknown, value: FilterValue): boolean {
  switch (op) {
    case 'eq':
    case 'ne':
      return isEqual(member, value);
    case 'co':
      return typeof member === 'string' && typeof value === 'string' && containsCodePoints(member, value);
    case 'sw':
      return typeof member === 'string' && typeof value === 'string' && startsWithCodePoints(member, value);
    case 'ew':
      return typeof member === 'string' && typeof value === 'string' && endsWithCodePoints(member, value);
    default:
      return isInOrder(op, orderOf(member, value));
  }
}

/** Equal JSON values: a missing member equals null; numbers by value (`1` is `1.0`), strings exactly. */
function isEqual(member: unknown, value: FilterValue): boolean {
  return value === null ? member === null || member === undefined : member === value;
}

/** The order of a member against the value: numbers with numbers, strings with strings by code points, else none. */
function orderOf(member: unknown, value: FilterValue): number | undefined {
  if (typeof member === 'number' && typeof value === 'number') return Math.sign(member - value);
  if (typeof member === 'string' && typeof value === 'string') return compareCodePoints(member, value);
  return undefined;
}

function isInOrder(op: 'gt' | 'ge' | 'lt' | 'le', order: number | undefined): boolean {
  if (order === undefined) return false;
  return op === 'gt' ? order > 0 : op === 'ge' ? order >= 0 : op === 'lt' ? order < 0 : order <= 0;
}

/** `pr`: present and not null, `""` or `{}` (an empty array reaches no value at all). */
function isPresent(value: unknown): boolean {
  if (value === undefined || value === null || value === '') return false;
  return !isObject(value) || Object.keys(value).length > 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The values a path reaches, or one missing value (null to every condition) when it reaches none. */
function reachedOrNull(root: unknown, path: readonly string[]): unknown[] {
  const reached = valuesAt(root, path);
  return reached.length === 0 ? [undefined] : reached;
}
