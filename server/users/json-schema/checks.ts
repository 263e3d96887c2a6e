/**
 * The closures a compiled schema is made of, one per keyword (and one per
 * boolean schema), each given its keyword's value, already checked, when
 * the schema is compiled (compile-schema.ts). Validating a value runs
 * them; nothing reads the schema object again.
 *
 * A check runs in one of two passes. The fast pass (`out` and `at` null)
 * answers valid or not, stops at the first failure and allocates nothing,
 * which is every valid user's one pass. Only a value that failed it is
 * checked again in the reporting pass, with `out` a list to push every
 * violation to and `at` the value's place in the user, from which a
 * violation's `field` is written.
 */
import { sameJson } from '../../../shared/merge-patch.js';
import { countCodePoints } from '../code-points.js';

/** One way a user breaks the schema: where, which keyword, and a sentence that says so. */
export interface SchemaViolation {
  /** The path of the value in the user, `a.b` and `tags[3]` as in every `invalid-user` problem; '' is the user itself. */
  field: string;
  keyword: string;
  detail: string;
}

/** Where a value sits in the user: its parent's place and its member name or index. */
interface Place {
  readonly parent: Place | undefined;
  readonly key: string | number;
}

/** The user itself. */
export const ROOT: Place = { parent: undefined, key: '' };

/** A compiled schema or keyword: true when `value` passes it (see the file's comment for the two passes). */
export type Check = (value: unknown, out: SchemaViolation[] | null, at: Place | null) => boolean;

type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The place of a member or an item, made in the reporting pass only. */
function childAt(at: Place | null, key: string | number): Place | null {
  return at === null ? null : { parent: at, key };
}

/** The `a.b` / `tags[3]` path of a place. */
function fieldOf(at: Place): string {
  if (at.parent === undefined) return '';
  const parent = fieldOf(at.parent);
  if (typeof at.key === 'number') return `${parent}[${at.key}]`;
  return parent === '' ? at.key : `${parent}.${at.key}`;
}

/**
 * Records a violation at `at` whose detail is the value's name followed by
 * `predicate` ("must be at least 0"), and answers false, the check's answer.
 */
function fail(out: SchemaViolation[], at: Place | null, keyword: string, predicate: string): false {
  const field = fieldOf(at!);
  out.push({ field, keyword, detail: `${field === '' ? 'the user' : field} ${predicate}` });
  return false;
}

export const PASS: Check = () => true;

/** The `false` schema, held by `keyword`: whatever value is there is refused. */
export function rejectAll(keyword: string): Check {
  return (_value, out, at) => out !== null && fail(out, at, keyword, 'is not allowed');
}

/** Every check must pass; the reporting pass runs them all, so every violation is listed. */
export function allChecks(checks: readonly Check[]): Check {
  if (checks.length === 0) return PASS;
  if (checks.length === 1) return checks[0]!;
  return (value, out, at) => {
    let valid = true;
    for (const check of checks) {
      if (check(value, out, at)) continue;
      if (out === null) return false;
      valid = false;
    }
    return valid;
  };
}

/** The seven names of `type`, each with its test and the noun of its sentence. */
export const TYPES: ReadonlyMap<string, { test: (value: unknown) => boolean; noun: string }> = new Map([
  ['null', { test: (value: unknown) => value === null, noun: 'null' }],
  ['boolean', { test: (value: unknown) => typeof value === 'boolean', noun: 'true or false' }],
  ['object', { test: isObject, noun: 'an object' }],
  ['array', { test: Array.isArray, noun: 'an array' }],
  ['number', { test: (value: unknown) => typeof value === 'number', noun: 'a number' }],
  ['string', { test: (value: unknown) => typeof value === 'string', noun: 'a string' }],
  // JSON has one kind of number: 1.0 is the integer 1.
  ['integer', { test: Number.isInteger, noun: 'an integer' }],
]);

/** "a, b or c". */
function orList(words: readonly string[]): string {
  return words.length === 1 ? words[0]! : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

export function typeCheck(names: readonly string[]): Check {
  const tests = names.map((name) => TYPES.get(name)!.test);
  const predicate = `must be ${orList(names.map((name) => TYPES.get(name)!.noun))}`;
  if (tests.length === 1) {
    const test = tests[0]!;
    return (value, out, at) => test(value) || (out !== null && fail(out, at, 'type', predicate));
  }
  return (value, out, at) => {
    for (const test of tests) if (test(value)) return true;
    return out !== null && fail(out, at, 'type', predicate);
  };
}

/** A value as a sentence shows it: a plain word as it is, anything else as JSON. */
function shown(value: unknown): string {
  return typeof value === 'string' && /^[^\s,"](?:[^,"]*[^\s,"])?$/.test(value) ? value : JSON.stringify(value);
}

const SHOWN_VALUES = 20;

function containsJson(values: readonly unknown[], value: unknown): boolean {
  for (const candidate of values) if (sameJson(candidate, value)) return true;
  return false;
}

/** `enum`: JSON equality, so a scalar is a Set lookup (1 and 1.0 are one value) and an object matches whatever its members' order. */
export function enumCheck(values: readonly unknown[]): Check {
  const scalars = new Set(values.filter((value) => typeof value !== 'object' || value === null));
  const composites = values.filter((value) => typeof value === 'object' && value !== null);
  const listed = values.slice(0, SHOWN_VALUES).map(shown).join(', ');
  const predicate =
    values.length === 0
      ? 'cannot take any value (the schema gives an empty enum)'
      : `must be one of: ${listed}${values.length > SHOWN_VALUES ? `, … (${values.length} values)` : ''}`;
  return (value, out, at) => {
    const found = typeof value !== 'object' || value === null ? scalars.has(value) : containsJson(composites, value);
    return found || (out !== null && fail(out, at, 'enum', predicate));
  };
}

export function constCheck(expected: unknown): Check {
  const predicate = `must be ${shown(expected)}`;
  return (value, out, at) => sameJson(value, expected) || (out !== null && fail(out, at, 'const', predicate));
}

function characters(count: number): string {
  return count === 1 ? '1 character' : `${count} characters`;
}

/** `minLength` in code points: a string of fewer UTF-16 units is short, one of twice as many is long enough, uncounted. */
export function minLengthCheck(min: number): Check {
  const predicate = `must have at least ${characters(min)}`;
  return (value, out, at) =>
    typeof value !== 'string' ||
    value.length >= 2 * min ||
    (value.length >= min && countCodePoints(value) >= min) ||
    (out !== null && fail(out, at, 'minLength', predicate));
}

/** `maxLength` in code points: a string of no more UTF-16 units than the limit is within it, uncounted. */
export function maxLengthCheck(max: number): Check {
  const predicate = `must have at most ${characters(max)}`;
  return (value, out, at) =>
    typeof value !== 'string' ||
    value.length <= max ||
    countCodePoints(value) <= max ||
    (out !== null && fail(out, at, 'maxLength', predicate));
}

export function patternCheck(source: string, pattern: RegExp): Check {
  const predicate = `must match the pattern ${source}`;
  return (value, out, at) =>
    typeof value !== 'string' || pattern.test(value) || (out !== null && fail(out, at, 'pattern', predicate));
}

/** `format`, asserted: `test` is the format's grammar, `phrase` its noun ("an email address"). */
export function formatCheck(test: (text: string) => boolean, phrase: string): Check {
  const predicate = `must be ${phrase}`;
  return (value, out, at) =>
    typeof value !== 'string' || test(value) || (out !== null && fail(out, at, 'format', predicate));
}

/** The four bounds on a number: the keyword, the comparison that passes, and the words of its sentence. */
const BOUNDS = {
  minimum: { passes: (value: number, bound: number) => value >= bound, words: 'must be at least' },
  maximum: { passes: (value: number, bound: number) => value <= bound, words: 'must be at most' },
  exclusiveMinimum: { passes: (value: number, bound: number) => value > bound, words: 'must be greater than' },
  exclusiveMaximum: { passes: (value: number, bound: number) => value < bound, words: 'must be less than' },
} as const;

export type BoundKeyword = keyof typeof BOUNDS;

export function boundCheck(keyword: BoundKeyword, bound: number): Check {
  const { passes, words } = BOUNDS[keyword];
  const predicate = `${words} ${bound}`;
  return (value, out, at) =>
    typeof value !== 'number' || passes(value, bound) || (out !== null && fail(out, at, keyword, predicate));
}

/** A number's shortest decimal form (what `String` writes) as digits times a power of ten. */
function decimalOf(number: number): { digits: bigint; exponent: number } {
  const [mantissa, exponent = '0'] = String(Math.abs(number)).split('e') as [string, string?];
  const [whole, fraction = ''] = mantissa.split('.') as [string, string?];
  return { digits: BigInt(whole + fraction), exponent: Number(exponent) - fraction.length };
}

/**
 * `multipleOf` on the decimals as written, not on doubles: 0.3 is a
 * multiple of 0.1 although 0.3 / 0.1 is 2.9999999999999996. Integers take
 * the `%` of doubles, exact below 2^53.
 */
export function multipleOfCheck(divisor: number): Check {
  const predicate = `must be a multiple of ${divisor}`;
  const d = decimalOf(divisor);
  const isMultiple = (value: number): boolean => {
    if (Number.isSafeInteger(value) && Number.isSafeInteger(divisor)) return value % divisor === 0;
    const v = decimalOf(value);
    const exponent = Math.min(v.exponent, d.exponent);
    const scaled = (x: { digits: bigint; exponent: number }) => x.digits * 10n ** BigInt(x.exponent - exponent);
    return scaled(v) % scaled(d) === 0n;
  };
  return (value, out, at) =>
    typeof value !== 'number' || isMultiple(value) || (out !== null && fail(out, at, 'multipleOf', predicate));
}

/** `prefixItems`: item i against schema i, for as many as both have. */
export function prefixItemsCheck(checks: readonly Check[]): Check {
  return (value, out, at) => {
    if (!Array.isArray(value)) return true;
    let valid = true;
    const count = Math.min(value.length, checks.length);
    for (let i = 0; i < count; i++) {
      if (checks[i]!(value[i], out, childAt(at, i))) continue;
      if (out === null) return false;
      valid = false;
    }
    return valid;
  };
}

/** `items`: every item from `from` on, past those `prefixItems` covers. */
export function itemsCheck(check: Check, from: number): Check {
  return (value, out, at) => {
    if (!Array.isArray(value)) return true;
    let valid = true;
    for (let i = from; i < value.length; i++) {
      if (check(value[i], out, childAt(at, i))) continue;
      if (out === null) return false;
      valid = false;
    }
    return valid;
  };
}

function items(count: number): string {
  return count === 1 ? '1 item' : `${count} items`;
}

export function minItemsCheck(min: number): Check {
  const predicate = `must have at least ${items(min)}`;
  return (value, out, at) =>
    !Array.isArray(value) || value.length >= min || (out !== null && fail(out, at, 'minItems', predicate));
}

export function maxItemsCheck(max: number): Check {
  const predicate = `must have at most ${items(max)}`;
  return (value, out, at) =>
    !Array.isArray(value) || value.length <= max || (out !== null && fail(out, at, 'maxItems', predicate));
}

/** A JSON text that is the same for equal values: members sorted, numbers as JSON writes them. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (!isObject(value)) return JSON.stringify(value);
  const members = Object.keys(value)
    .sort()
    .map((name) => `${JSON.stringify(name)}:${canonicalJson(value[name])}`);
  return `{${members.join(',')}}`;
}

/** Below this many items, comparing every pair costs less than building the maps. */
const PAIRWISE_ITEMS = 16;

/** The indexes of the first item equal to an earlier one, and of that earlier one. */
function firstRepeat(list: readonly unknown[]): [number, number] | undefined {
  if (list.length <= PAIRWISE_ITEMS) {
    for (let i = 1; i < list.length; i++) for (let j = 0; j < i; j++) if (sameJson(list[i], list[j])) return [j, i];
    return undefined;
  }
  // Scalars and composites apart, so that the string "[1]" and the array [1] stay different.
  const scalars = new Map<unknown, number>();
  const composites = new Map<string, number>();
  for (const [i, item] of list.entries()) {
    const [seen, key] = typeof item === 'object' && item !== null ? [composites, canonicalJson(item)] : [scalars, item];
    const earlier = (seen as Map<unknown, number>).get(key);
    if (earlier !== undefined) return [earlier, i];
    (seen as Map<unknown, number>).set(key, i);
  }
  return undefined;
}

export function uniqueItemsCheck(): Check {
  return (value, out, at) => {
    if (!Array.isArray(value)) return true;
    const repeat = firstRepeat(value);
    if (repeat === undefined) return true;
    if (out === null) return false;
    const [first, second] = repeat.map((index) => fieldOf(childAt(at, index)!));
    return fail(out, at, 'uniqueItems', `must not hold the same item twice (${first} and ${second} are equal)`);
  };
}

/**
 * A member's value, or undefined when it is absent. A parsed JSON object
 * holds no undefined, so a read that finds one means absent, except for the
 * names Object.prototype answers (`toString`, `__proto__`), which are read
 * only as own members.
 */
function memberReader(name: string): (object: JsonObject) => unknown {
  if (!(name in Object.prototype)) return (object) => object[name];
  return (object) => (Object.hasOwn(object, name) ? object[name] : undefined);
}

export function requiredCheck(names: readonly string[]): Check {
  const readers = names.map(memberReader);
  return (value, out, at) => {
    if (!isObject(value)) return true;
    let valid = true;
    for (let i = 0; i < readers.length; i++) {
      if (readers[i]!(value) !== undefined) continue;
      if (out === null) return false;
      valid = fail(out, childAt(at, names[i]!), 'required', 'is required');
    }
    return valid;
  };
}

export function propertiesCheck(properties: ReadonlyMap<string, Check>): Check {
  const names = [...properties.keys()];
  const readers = names.map(memberReader);
  const checks = [...properties.values()];
  return (value, out, at) => {
    if (!isObject(value)) return true;
    let valid = true;
    for (let i = 0; i < names.length; i++) {
      const member = readers[i]!(value);
      if (member === undefined || checks[i]!(member, out, childAt(at, names[i]!))) continue;
      if (out === null) return false;
      valid = false;
    }
    return valid;
  };
}

// A parsed JSON object's prototype is Object.prototype, which has no
// enumerable members: `for...in` visits its own names only, without the
// array Object.keys would allocate.

export function patternPropertiesCheck(patterns: ReadonlyArray<{ pattern: RegExp; check: Check }>): Check {
  return (value, out, at) => {
    if (!isObject(value)) return true;
    let valid = true;
    for (const name in value) {
      for (const { pattern, check } of patterns) {
        if (!pattern.test(name) || check(value[name], out, childAt(at, name))) continue;
        if (out === null) return false;
        valid = false;
      }
    }
    return valid;
  };
}

/** `additionalProperties`: the members that neither `properties` names nor a `patternProperties` pattern matches. */
export function additionalPropertiesCheck(
  check: Check,
  known: ReadonlySet<string>,
  patterns: readonly RegExp[],
): Check {
  const isKnown = (name: string): boolean => {
    if (known.has(name)) return true;
    for (const pattern of patterns) if (pattern.test(name)) return true;
    return false;
  };
  return (value, out, at) => {
    if (!isObject(value)) return true;
    let valid = true;
    for (const name in value) {
      if (isKnown(name) || check(value[name], out, childAt(at, name))) continue;
      if (out === null) return false;
      valid = false;
    }
    return valid;
  };
}

const SHOWN_ALTERNATIVES = 5;

/** What each alternative of `anyOf` or `oneOf` says of the value, for the sentence that says none fits. */
function alternatives(checks: readonly Check[], value: unknown, at: Place | null): string {
  const said = checks.slice(0, SHOWN_ALTERNATIVES).map((check) => {
    const out: SchemaViolation[] = [];
    check(value, out, at);
    return out.map((violation) => violation.detail).join(' and ');
  });
  return said.join('; or ') + (checks.length > SHOWN_ALTERNATIVES ? '; or …' : '');
}

export function anyOfCheck(checks: readonly Check[]): Check {
  return (value, out, at) => {
    for (const check of checks) if (check(value, null, null)) return true;
    return out !== null && fail(out, at, 'anyOf', `must satisfy one of: ${alternatives(checks, value, at)}`);
  };
}

export function oneOfCheck(checks: readonly Check[]): Check {
  return (value, out, at) => {
    let first = -1;
    for (let i = 0; i < checks.length; i++) {
      if (!checks[i]!(value, null, null)) continue;
      if (first === -1) {
        first = i;
        continue;
      }
      const predicate = `must satisfy exactly one of the oneOf schemas; it satisfies both schema ${first + 1} and schema ${i + 1}`;
      return out !== null && fail(out, at, 'oneOf', predicate);
    }
    if (first !== -1) return true;
    return out !== null && fail(out, at, 'oneOf', `must satisfy one of: ${alternatives(checks, value, at)}`);
  };
}

export function notCheck(check: Check): Check {
  return (value, out, at) =>
    !check(value, null, null) || (out !== null && fail(out, at, 'not', 'must not satisfy the schema under not'));
}
