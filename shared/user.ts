/**
 * The user resource: the rules a PUT body must follow, and the grammar of
 * `/users/{ref}` references. Shared so that usersctl can check input before
 * it sends it.
 */

export const NAME_MAX_LENGTH = 200;
export const ALIAS_MAX_LENGTH = 200;
export const MAX_DEPTH = 16;
const RESERVED_ALIAS = 'new';

/** API.md's path into a user: `name *( "." name )`, name = ALPHA / "_" followed by ALPHA / DIGIT / "_" / "-". */
export const USER_PATH = /^[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*$/;
/** Keys that are refused at any depth: they are the prototype-pollution vectors. */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export class UserValidationError extends Error {
  override readonly name = 'UserValidationError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** A C0 control, DEL, a C1 control (Unicode general category Cc) or a lone surrogate. */
const UNFIT_IN_NAME = /[\u0000-\u001f\u007f-\u009f\p{Cs}]/u;

/** Checks a user name; returns an error message, or undefined when it is fine. */
function checkName(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'name must be a string';
  // One scan for the usual name; which rule failed is looked up only after.
  if (UNFIT_IN_NAME.test(name))
    return name.isWellFormed() ? 'name must not contain control characters' : 'name must be well-formed Unicode';
  // Characters are code points: never more than the UTF-16 length, counted only past it.
  if (name.length === 0 || (name.length > NAME_MAX_LENGTH && codePoints(name) > NAME_MAX_LENGTH))
    return `name must have 1 to ${NAME_MAX_LENGTH} characters`;
  return undefined;
}

/** The number of code points of a well-formed string. */
function codePoints(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) if ((text.charCodeAt(i) & 0xfc00) !== 0xdc00) count++;
  return count;
}

/**
 * Checks a parsed PUT or POST body and returns it as a user without its id.
 * Throws UserValidationError naming the field.
 */
export function validateUserBody(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UserValidationError('', 'the body must be a JSON object');
  }
  if (!checkFlat(value as Record<string, unknown>)) checkNested(value);
  const user = value as Record<string, unknown>;
  // A parsed JSON object holds no undefined, and Object.prototype has no
  // name or id: undefined means absent, without a call of Object.hasOwn.
  if (user.name === undefined) throw new UserValidationError('name', 'name is required');
  const nameError = checkName(user.name);
  if (nameError !== undefined) throw new UserValidationError('name', nameError);
  if (user.id !== undefined && !isId(user.id)) {
    throw new UserValidationError('id', 'id must be a positive safe integer');
  }
  return user;
}

/**
 * The checks of `checkNested` on an object whose fields are all scalars,
 * the usual body, without its stack: false (nothing thrown) as soon as a
 * field holds an object or array, which `checkNested` then walks.
 */
function checkFlat(object: Record<string, unknown>): boolean {
  for (const key of Object.keys(object)) {
    const field = object[key];
    if (typeof field === 'object' && field !== null) return false;
    checkKey(key, key);
    checkScalar(field, key);
  }
  return true;
}

function checkKey(key: string, path: string): void {
  if (FORBIDDEN_KEYS.has(key)) throw new UserValidationError(path, `the key "${key}" is not allowed`);
  if (!key.isWellFormed())
    throw new UserValidationError(path, 'a key must be well-formed Unicode (no lone surrogates)');
}

/** Walks a body with an explicit stack, so a deeply nested one cannot overflow the call stack. */
function checkNested(value: object): void {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value, path: '', depth: 1 }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (typeof item.value !== 'object' || item.value === null) {
      checkScalar(item.value, item.path);
      continue;
    }
    if (item.depth > MAX_DEPTH) {
      throw new UserValidationError(item.path, `nesting deeper than ${MAX_DEPTH} levels`);
    }
    if (Array.isArray(item.value)) {
      item.value.forEach((element, index) =>
        stack.push({ value: element, path: `${item.path}[${index}]`, depth: item.depth + 1 }),
      );
      continue;
    }
    for (const key of Object.keys(item.value)) {
      const path = item.path === '' ? key : `${item.path}.${key}`;
      checkKey(key, path);
      stack.push({ value: (item.value as Record<string, unknown>)[key], path, depth: item.depth + 1 });
    }
  }
}

/**
 * I-JSON (RFC 7493 sections 2.1 and 2.2): a string is well-formed Unicode,
 * a number fits a double. JSON.parse turns 1e400 into Infinity, which
 * JSON.stringify would store as null.
 */
function checkScalar(value: unknown, path: string): void {
  if (typeof value === 'string' && !value.isWellFormed())
    throw new UserValidationError(path, 'a string must be well-formed Unicode (no lone surrogates)');
  if (typeof value === 'number' && !Number.isFinite(value))
    throw new UserValidationError(path, 'a number must fit a double (at most about 1.8e308)');
}

export function isId(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}

/** A parsed `/users/{ref}` segment. */
export type Ref =
  | { kind: 'id'; id: number }
  | { kind: 'alias'; alias: string }
  /** A digit string that is not a canonical safe integer: answered 404. */
  | { kind: 'no-such-id' }
  /** Anything else that is malformed: answered 400. */
  | { kind: 'invalid'; reason: string };

// RFC 3986 section 2.3: unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"
function isUnreserved(code: number): boolean {
  return (
    (code >= 0x61 && code <= 0x7a) || // a-z
    (code >= 0x41 && code <= 0x5a) || // A-Z
    (code >= 0x30 && code <= 0x39) || // 0-9
    code === 0x2d ||
    code === 0x2e ||
    code === 0x5f ||
    code === 0x7e
  );
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  if (code >= 0x41 && code <= 0x46) return code - 0x37;
  if (code >= 0x61 && code <= 0x66) return code - 0x57;
  return -1;
}

const MAX_SAFE_DIGITS = String(Number.MAX_SAFE_INTEGER).length;

/** `segment` with its percent-encodings decoded (the segment itself when it has none), or why it is malformed. */
function decodeSegment(segment: string): string | Ref {
  let first = 0;
  while (first < segment.length && segment.charCodeAt(first) !== 0x25) first++;
  if (first === segment.length) return segment;
  let decoded = segment.slice(0, first);
  for (let i = first; i < segment.length; i++) {
    const code = segment.charCodeAt(i);
    if (code !== 0x25) {
      decoded += segment[i];
      continue;
    }
    const high = hexValue(segment.charCodeAt(i + 1));
    const low = hexValue(segment.charCodeAt(i + 2));
    if (high < 0 || low < 0) return { kind: 'invalid', reason: 'malformed percent-encoding' };
    const value = high * 16 + low;
    if (!isUnreserved(value))
      return { kind: 'invalid', reason: 'only unreserved characters are allowed in a reference' };
    decoded += String.fromCharCode(value);
    i += 2;
  }
  return decoded;
}

/** `idOfDigits`: `text` from `start` is not a string of 1 or more ASCII digits. */
export const NOT_DIGITS = -1;
/** `idOfDigits`: digits, but not an id (a leading zero, or past the safe integers). */
export const NO_SUCH_ID = 0;

/**
 * The id that `text` spells from `start` to its end: ids are canonical
 * decimal safe integers. `NOT_DIGITS` or `NO_SUCH_ID` when it spells none.
 */
export function idOfDigits(text: string, start: number): number {
  const length = text.length;
  if (length <= start) return NOT_DIGITS;
  // The value is computed on the way: exact up to 2^53, and past it no
  // longer a safe integer whatever the rounding.
  let id = 0;
  for (let i = start; i < length; i++) {
    const digit = text.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return NOT_DIGITS;
    id = id * 10 + digit;
  }
  if (text.charCodeAt(start) === 0x30 || length - start > MAX_SAFE_DIGITS || !Number.isSafeInteger(id))
    return NO_SUCH_ID;
  return id;
}

/**
 * Parses one path segment after `/users/`. Percent-encoded unreserved
 * characters equal their plain form (RFC 3986 section 6.2.2.2); any other
 * percent-encoding or character makes the reference malformed.
 */
export function parseRef(segment: string): Ref {
  // Most references are plain ids, with nothing to decode.
  const plain = idOfDigits(segment, 0);
  if (plain !== NOT_DIGITS) return plain === NO_SUCH_ID ? { kind: 'no-such-id' } : { kind: 'id', id: plain };
  const decoded = decodeSegment(segment);
  if (typeof decoded !== 'string') return decoded;
  if (decoded.length === 0) return { kind: 'invalid', reason: 'the reference is empty' };
  for (let i = 0; i < decoded.length; i++) {
    if (!isUnreserved(decoded.charCodeAt(i)))
      return { kind: 'invalid', reason: 'only unreserved characters are allowed in a reference' };
  }
  // Digits percent-encoded (`%31` is `1`) are the same id.
  const id = idOfDigits(decoded, 0);
  if (id !== NOT_DIGITS) return id === NO_SUCH_ID ? { kind: 'no-such-id' } : { kind: 'id', id };
  if (decoded.length > ALIAS_MAX_LENGTH)
    return { kind: 'invalid', reason: `an alias has at most ${ALIAS_MAX_LENGTH} characters` };
  if (decoded === '.' || decoded === '..') return { kind: 'invalid', reason: 'dot-segments are not references' };
  if (decoded === RESERVED_ALIAS) return { kind: 'invalid', reason: `"${RESERVED_ALIAS}" is reserved` };
  return { kind: 'alias', alias: decoded };
}
