/**
 * The keys of a declared field's index (API.md "Declared fields"): one text
 * per value, computed here for every store, whose order is the order of
 * `sort` (users/sort.ts): numbers by value, then strings by code points
 * (lowercased on a case-insensitive field), then `false`, then `true`; the
 * key LAST_KEY stands for a missing, null, array or object member, which
 * sorts after all others. A prefix of a string gives a prefix of its key,
 * so `sw` is a range of keys too.
 *
 * Every character of a key is below U+D800, so comparing keys as
 * JavaScript strings (UTF-16 units), by code points and as UTF-8 bytes
 * (PostgreSQL's `collate "C"`) gives one order, and a key holds neither
 * NUL nor a lone surrogate, which a database's text cannot.
 */
import type { CompareOp, FilterValue } from './filter-parse.js';
import { sortValueAt } from './sort.js';
import { memberOf, valuesAt } from './user-path.js';

const NUMBER = '0';
const STRING = '1';
const FALSE = '2';
const TRUE = '3';
/** The sort key of a member that sorts last: missing, null, an array or an object. */
export const LAST_KEY = '4';
/** Above every character a key holds: the end of the range of keys that start with a prefix. */
const PAST_PREFIX = '\uE000';

/** A range of keys, each bound included or not. */
export interface KeyRange {
  readonly low: string;
  readonly lowInclusive: boolean;
  readonly high: string;
  readonly highInclusive: boolean;
}

/** Whether `range` holds one key alone, as an `eq` gives. */
export function isOneKey(range: KeyRange): boolean {
  return range.low === range.high && range.lowInclusive && range.highInclusive;
}

/**
 * The key of a JSON value, folded to lowercase when `fold`; undefined for null, objects and arrays, which have none.
 */
export function valueKey(value: unknown, fold: boolean): string | undefined {
  switch (typeof value) {
    case 'number':
      return numberKey(value);
    case 'string':
      return flatJoin(STRING, textKey(value, fold));
    case 'boolean':
      return value ? TRUE : FALSE;
    default:
      return undefined;
  }
}

/** The characters of a string's key after its rank. */
function textKey(text: string, fold: boolean): string {
  return encodeText(fold ? text.toLowerCase() : text);
}

/**
 * `parts` as one flat string. A key of 13 characters or more made with
 * `+` is a rope (a pair of pointers to its parts) that the first
 * comparison flattens into a copy while the rope stays, pointing at it: an
 * email's key an index keeps then takes 72 bytes where a flat one takes
 * 40, and a request's key compares through the engine's slow path (a
 * lookup among a million emails: about 0.5 µs more). A join writes one
 * flat string at once.
 */
function flatJoin(...parts: string[]): string {
  return parts.join('');
}

/** The value a key stands for (a folded string as folded); undefined for LAST_KEY. */
export function keyValue(key: string): number | string | boolean | undefined {
  switch (key[0]) {
    case NUMBER:
      return digitsNumber(key.slice(1));
    case STRING:
      return decodeText(key.slice(1));
    case FALSE:
      return false;
    case TRUE:
      return true;
    default:
      return undefined;
  }
}

/**
 * The keys of the values a user holds at `path`, each once: where the path
 * meets an array, every element's, as a filter reads them (users/user-path.ts).
 */
export function elementKeysOf(user: unknown, path: readonly string[], fold: boolean): string[] {
  const keys = new Set<string>();
  for (const value of valuesAt(user, path)) {
    const key = valueKey(value, fold);
    if (key !== undefined) keys.add(key);
  }
  return [...keys];
}

/** A user's keys at a declared field: the one it sorts by and those its conditions find it by. */
interface UserKeys {
  readonly sortKey: string;
  readonly keys: readonly string[];
}

/**
 * The keys of `user` at `path`: where no array lies on the path, as for
 * most users, the one value there is the one it sorts on, so its key
 * serves both, made once. Where one does, the user sorts under LAST_KEY
 * (users/sort.ts reads no element), and its keys come from the elements.
 */
export function userKeysOf(user: unknown, path: readonly string[], fold: boolean): UserKeys {
  const sortKey = sortKeyOf(user, path, fold);
  if (arrayOnPath(user, path)) return { sortKey, keys: elementKeysOf(user, path, fold) };
  return { sortKey, keys: sortKey === LAST_KEY ? [] : [sortKey] };
}

function arrayOnPath(user: unknown, path: readonly string[]): boolean {
  let value = user;
  for (const name of path) {
    if (Array.isArray(value)) return true;
    value = memberOf(value, name);
  }
  return Array.isArray(value);
}

/** The key of the value a user sorts on at `path` (users/sort.ts), LAST_KEY when it sorts last. */
export function sortKeyOf(user: unknown, path: readonly string[], fold: boolean): string {
  return valueKey(sortValueAt(user, path), fold) ?? LAST_KEY;
}

/**
 * The keys a condition `op value` can hold for, on a field folded or not:
 * every user it matches has an element key in the range. Undefined when no
 * range serves it (`ne`, `co`, `ew`, `eq null`).
 */
export function keyRangeOf(op: CompareOp, value: FilterValue, fold: boolean): KeyRange | undefined {
  const key = valueKey(value, fold);
  if (key === undefined) return undefined;
  const rankStart = key[0]!;
  const rankEnd = rankStart === NUMBER ? STRING : FALSE;
  switch (op) {
    case 'eq':
      return { low: key, lowInclusive: true, high: key, highInclusive: true };
    case 'sw':
      return { low: key, lowInclusive: true, high: key + PAST_PREFIX, highInclusive: false };
    case 'gt':
    case 'ge':
      return { low: key, lowInclusive: op === 'ge', high: rankEnd, highInclusive: false };
    case 'lt':
    case 'le':
      return { low: rankStart, lowInclusive: true, high: key, highInclusive: op === 'le' };
    default:
      return undefined;
  }
}

/** True when `key` lies in `range`. */
export function inRange(key: string, range: KeyRange): boolean {
  const aboveLow = range.lowInclusive ? key >= range.low : key > range.low;
  return aboveLow && (range.highInclusive ? key <= range.high : key < range.high);
}

// ------------------------------------------------------------ numbers

const bits = new DataView(new ArrayBuffer(8));

function numberKey(n: number): string {
  if (Number.isInteger(n) && n >= 0 && n < SMALL_INTEGERS) return (smallKeys[n] ??= numberKeyOf(n));
  return numberKeyOf(n);
}

/** Counts, ages and ranks repeat over a whole index: their keys are made once each, and shared. */
const SMALL_INTEGERS = 4096;
const smallKeys: string[] = [];

/**
 * NUMBER, then 16 hex digits whose order is the number's: the IEEE 754 bits
 * with the sign bit set for a positive number, all bits inverted for a negative one.
 */
function numberKeyOf(n: number): string {
  // -0 is 0, as it is to `eq` and `sort`.
  bits.setFloat64(0, n === 0 ? 0 : n);
  let high = bits.getUint32(0);
  let low = bits.getUint32(4);
  if (high >= 0x8000_0000) {
    high = ~high >>> 0;
    low = ~low >>> 0;
  } else high = (high | 0x8000_0000) >>> 0;
  return flatJoin(NUMBER, hex8(high), hex8(low));
}

function digitsNumber(digits: string): number {
  let high = parseInt(digits.slice(0, 8), 16);
  let low = parseInt(digits.slice(8), 16);
  if (high >= 0x8000_0000) high = (high & 0x7fff_ffff) >>> 0;
  else {
    high = ~high >>> 0;
    low = ~low >>> 0;
  }
  bits.setUint32(0, high);
  bits.setUint32(4, low);
  return bits.getFloat64(0);
}

function hex8(n: number): string {
  return n.toString(16).padStart(8, '0');
}

// ------------------------------------------------------------ strings

/** The first code point written as three characters: ESCAPE, then two digits of 12 bits. */
const ESCAPE = 0xd7ff;
const DIGIT_BASE = 0x1000;

/**
 * A text of code points from U+0002 to below ESCAPE only, which encodeText keeps as it is (most texts), and so
 * decodeText: one test, no copy.
 */
const KEPT_AS_IS = /^[\u0002-\ud7fe]*$/;

/**
 * A string as key characters, one code point at a time, in an order-
 * and prefix-preserving way: U+0000 and U+0001 become U+0001 U+0001 and
 * U+0001 U+0002; a code point from ESCAPE up (surrogates, lone or paired,
 * among them) becomes ESCAPE and two digits of its distance from ESCAPE;
 * any other stays as it is.
 */
function encodeText(text: string): string {
  if (KEPT_AS_IS.test(text)) return text;
  let out = '';
  for (const character of text) {
    const c = character.codePointAt(0)!;
    if (c <= 1) out += c === 0 ? '\u0001\u0001' : '\u0001\u0002';
    else if (c < ESCAPE) out += character;
    else {
      const d = c - ESCAPE;
      out += String.fromCharCode(ESCAPE, DIGIT_BASE + (d >> 12), DIGIT_BASE + (d & 0xfff));
    }
  }
  return out;
}

function decodeText(encoded: string): string {
  if (KEPT_AS_IS.test(encoded)) return encoded;
  let out = '';
  for (let i = 0; i < encoded.length; i++) {
    const c = encoded.charCodeAt(i);
    if (c === 1) out += String.fromCharCode(encoded.charCodeAt(++i) - 1);
    else if (c === ESCAPE) {
      const d = ((encoded.charCodeAt(i + 1) - DIGIT_BASE) << 12) | (encoded.charCodeAt(i + 2) - DIGIT_BASE);
      out += String.fromCodePoint(ESCAPE + d);
      i += 2;
    } else out += encoded[i];
  }
  return out;
}
