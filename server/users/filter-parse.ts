/**
 * The filter of `GET /users?filter=` (API.md "The filter syntax": SCIM's,
 * RFC 7644 section 3.4.2.2, for JSON users), parsed by hand into a typed
 * tree. A failure names the 1-based column (in characters, that is code
 * points) of the first error and what was expected there, in one sentence
 * for a problem's `detail`; nothing is skipped or guessed, so a filter
 * never fails open.
 *
 * Spaces (U+0020 only) may stand between any two tokens, and must stand
 * between two words or literals (`a eq 1`, not `a eq"x"`); brackets and
 * parentheses need none. `and` and `or` chains are flat in the tree:
 * `a and (b and c)` is one `and` of three operands.
 */
import { parsePath } from './user-path.js';

/**
 * The bounds of a filter, which keep parsing and matching cheap: at most
 * MAX_FILTER_LENGTH characters, at most MAX_FILTER_CONDITIONS conditions
 * (each `path op value`, `path pr` and `path[...]` counts one) and at most
 * MAX_FILTER_DEPTH levels of `(`, `not (` and `[` open at once, which also
 * bounds the parser's and the matcher's recursion.
 */
export const MAX_FILTER_LENGTH = 2048;
export const MAX_FILTER_CONDITIONS = 32;
export const MAX_FILTER_DEPTH = 16;

export type CompareOp = 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le';

/** A JSON literal: the value of a comparison. */
export type FilterValue = string | number | boolean | null;

/** A parsed filter. Paths are member names, relative to the user or, inside `path[...]`, to the element. */
export type Filter =
  | { readonly kind: 'or'; readonly operands: readonly Filter[] }
  | { readonly kind: 'and'; readonly operands: readonly Filter[] }
  | { readonly kind: 'not'; readonly operand: Filter }
  | { readonly kind: 'compare'; readonly path: readonly string[]; readonly op: CompareOp; readonly value: FilterValue }
  | { readonly kind: 'present'; readonly path: readonly string[] }
  | { readonly kind: 'some'; readonly path: readonly string[]; readonly filter: Filter };

export type FilterParse =
  | { readonly ok: true; readonly filter: Filter }
  | { readonly ok: false; readonly column: number; readonly detail: string };

const OPERATORS: ReadonlySet<string> = new Set(['eq', 'ne', 'co', 'sw', 'ew', 'gt', 'ge', 'lt', 'le']);
const OPERATOR_LIST = 'an operator (eq, ne, co, sw, ew, gt, ge, lt, le, pr) or `[`';
const VALUE_LIST = 'a value (a JSON string, number, true, false or null)';
const NAME_RULE = 'a letter or `_`, then letters, digits, `_` or `-`';

interface Fault {
  readonly at: number;
  readonly expected: string;
}

interface Token {
  readonly type: 'punct' | 'word' | 'string' | 'number' | 'other' | 'end';
  /** UTF-16 offsets of the token in the filter. */
  readonly start: number;
  readonly end: number;
  readonly value?: FilterValue;
  /** What is wrong inside the token, reported only where the token is used. */
  readonly fault?: Fault;
}

/**
 * The parses of the filters given lately, by their text: a parse is pure and
 * its tree never changed. Two generations of at most CACHED_FILTERS each,
 * of at most CACHED_LENGTH characters: a parse is kept in the young one, a
 * parse found in the old one moves to the young, and a full young one
 * becomes the old, so that a stream of filters each given once (lookups by
 * a unique field) costs one insert each and no eviction walk.
 */
let young = new Map<string, FilterParse>();
let old = new Map<string, FilterParse>();
const CACHED_FILTERS = 1000;
const CACHED_LENGTH = 256;

/** Parses a filter; never throws. */
export function parseFilter(text: string): FilterParse {
  const recent = young.get(text);
  if (recent !== undefined) return recent;
  const parse = old.get(text) ?? parseNew(text);
  if (text.length <= CACHED_LENGTH) keep(text, parse);
  return parse;
}

function keep(text: string, parse: FilterParse): void {
  if (young.size >= CACHED_FILTERS) {
    old = young;
    young = new Map();
  }
  young.set(text, parse);
}

function parseNew(text: string): FilterParse {
  if (isLongerThan(text, MAX_FILTER_LENGTH))
    return failure(
      MAX_FILTER_LENGTH + 1,
      `a filter has at most ${MAX_FILTER_LENGTH.toLocaleString('en-US')} characters`,
    );
  try {
    return { ok: true, filter: new FilterParser(text).parse() };
  } catch (error) {
    if (!(error instanceof FilterSyntaxError)) throw error;
    return failure([...text.slice(0, error.at)].length + 1, error.message);
  }
}

/** True when `text` has more than `max` characters (code points), found without counting a long text through. */
function isLongerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  if (text.length > 2 * max) return true;
  let characters = text.length;
  // The low half of a pair is no character of its own.
  for (let i = 1; i < text.length; i++)
    if ((text.charCodeAt(i) & 0xfc00) === 0xdc00 && (text.charCodeAt(i - 1) & 0xfc00) === 0xd800) characters--;
  return characters > max;
}

function failure(column: number, sentence: string): FilterParse {
  return { ok: false, column, detail: `at column ${column}: ${sentence}` };
}

/** A parse error at a UTF-16 offset; it never leaves parseFilter. */
class FilterSyntaxError extends Error {
  constructor(
    readonly at: number,
    message: string,
  ) {
    super(message);
  }
}

/** A recursive-descent parser over tokens lexed one at a time, so the first error in reading order is the one named. */
class FilterParser {
  private token: Token;
  private previous: Token | undefined;
  private conditions = 0;
  private depth = 0;

  constructor(private readonly text: string) {
    this.token = lexToken(text, 0);
  }

  parse(): Filter {
    const filter = this.parseOr();
    this.expectCloser(undefined);
    return filter;
  }

  /** The next token, refused when it is a word or literal glued to the one before. */
  private current(): Token {
    const token = this.token;
    const glued = this.previous !== undefined && this.previous.end === token.start;
    if (glued && isWordy(this.previous!) && isWordy(token))
      throw new FilterSyntaxError(token.start, 'expected a space between two words or values');
    return token;
  }

  private advance(): Token {
    const token = this.current();
    this.previous = token;
    this.token = lexToken(this.text, token.end);
    return token;
  }

  private isKeyword(keyword: string): boolean {
    const token = this.current();
    return token.type === 'word' && isWordOf(this.text, token, keyword);
  }

  private isPunct(punct: string): boolean {
    const token = this.current();
    return token.type === 'punct' && this.textOf(token) === punct;
  }

  private textOf(token: Token): string {
    return this.text.slice(token.start, token.end);
  }

  /** The end of a chain of conditions: `)`, `]` or, with no closer, the end of the filter. */
  private expectCloser(closer: ')' | ']' | undefined): void {
    const token = this.current();
    if (closer === undefined ? token.type === 'end' : this.isPunct(closer)) return;
    const what = closer === undefined ? 'the end of the filter' : `\`${closer}\``;
    throw new FilterSyntaxError(token.start, `expected \`and\`, \`or\` or ${what}`);
  }

  /** `or` binds loosest, then `and`; `not` and parentheses are terms. */
  private parseOr(): Filter {
    return this.parseChain('or');
  }

  /** Operands joined by `keyword`. */
  private parseChain(keyword: 'and' | 'or'): Filter {
    const first = this.operandOf(keyword);
    if (!this.isKeyword(keyword)) return first;
    const operands = [first];
    while (this.isKeyword(keyword)) {
      this.advance();
      operands.push(this.operandOf(keyword));
    }
    return combine(keyword, operands);
  }

  /** An operand of a chain: an `and` chain within an `or` chain, a term within an `and` chain. */
  private operandOf(keyword: 'and' | 'or'): Filter {
    return keyword === 'or' ? this.parseChain('and') : this.parseTerm();
  }

  private parseTerm(): Filter {
    const token = this.current();
    if (this.isPunct('(')) return this.parseNested(token, ')');
    if (token.type !== 'word') throw new FilterSyntaxError(token.start, 'expected a path, `not (` or `(`');
    this.advance();
    const word = this.textOf(token);
    if (isWordOf(this.text, token, 'not') && this.isPunct('('))
      return { kind: 'not', operand: this.parseNested(token, ')') };
    return this.parseCondition(token, word);
  }

  /**
   * `( filter )` or the `[ filter ]` of a condition, its opening bracket at
   * the current token; `opener` is where the level starts (`not`, `(` or the path).
   */
  private parseNested(opener: Token, closer: ')' | ']'): Filter {
    this.enter(opener);
    this.advance();
    const filter = this.parseOr();
    this.expectCloser(closer);
    this.advance();
    this.depth--;
    return filter;
  }

  private enter(opener: Token): void {
    if (++this.depth > MAX_FILTER_DEPTH)
      throw new FilterSyntaxError(
        opener.start,
        `a filter nests at most ${MAX_FILTER_DEPTH} levels of \`(\`, \`not (\` and \`[\``,
      );
  }

  /** A condition on the path `word`: `path[filter]`, `path pr` or `path op value`. */
  private parseCondition(token: Token, word: string): Filter {
    const path = pathOf(token, word);
    if (++this.conditions > MAX_FILTER_CONDITIONS)
      throw new FilterSyntaxError(token.start, `a filter has at most ${MAX_FILTER_CONDITIONS} conditions`);
    if (this.isPunct('[')) return { kind: 'some', path, filter: this.parseNested(token, ']') };
    const next = this.current();
    const op = next.type === 'word' ? this.textOf(next).toLowerCase() : '';
    if (op === 'pr') {
      this.advance();
      return { kind: 'present', path };
    }
    if (!OPERATORS.has(op)) {
      const expected =
        word.toLowerCase() === 'not' ? '`(` after `not`' : `${OPERATOR_LIST} after the path ${quote(word)}`;
      throw new FilterSyntaxError(next.start, `expected ${expected}`);
    }
    this.advance();
    return { kind: 'compare', path, op: op as CompareOp, value: this.parseValue(op) };
  }

  private parseValue(op: string): FilterValue {
    const token = this.current();
    const literal = token.type === 'string' || token.type === 'number';
    if (literal && token.fault !== undefined) throw new FilterSyntaxError(token.fault.at, token.fault.expected);
    const value = token.type === 'word' ? JSON_WORDS.get(this.textOf(token)) : literal ? token.value : undefined;
    if (value === undefined) throw new FilterSyntaxError(token.start, `expected ${VALUE_LIST} after \`${op}\``);
    if ((op === 'co' || op === 'sw' || op === 'ew') && typeof value !== 'string')
      throw new FilterSyntaxError(token.start, `expected a string after \`${op}\`: co, sw and ew compare strings`);
    if ((op === 'gt' || op === 'ge' || op === 'lt' || op === 'le') && (value === null || typeof value === 'boolean'))
      throw new FilterSyntaxError(
        token.start,
        `expected a number or a string after \`${op}\`: true, false and null have no order`,
      );
    this.advance();
    return value;
  }
}

const JSON_WORDS: ReadonlyMap<string, FilterValue> = new Map<string, FilterValue>([
  ['true', true],
  ['false', false],
  ['null', null],
]);

/** The names of a path word, or the error at its first bad name. */
function pathOf(token: Token, word: string): string[] {
  if (token.fault !== undefined) throw new FilterSyntaxError(token.fault.at, token.fault.expected);
  return parsePath(word)!;
}

/** An `and` or `or` of the operands; an operand of the same kind (from parentheses) is spread into it. */
function combine(kind: 'and' | 'or', operands: Filter[]): Filter {
  if (operands.length === 1) return operands[0]!;
  return { kind, operands: operands.flatMap((f) => (f.kind === kind ? f.operands : [f])) };
}

function isWordy(token: Token): boolean {
  return token.type === 'word' || token.type === 'string' || token.type === 'number';
}

/** A path or other token text in a message, cut short when long. */
function quote(text: string): string {
  return `\`${text.length > 40 ? `${text.slice(0, 40)}…` : text}\``;
}

// ------------------------------------------------------------ the lexer

// What could be meant as a number: checked against JSON's grammar as a whole, so `01` or `1x` is one error.
const NUMBER_CHUNK = /[-0-9][0-9A-Za-z_.+-]*/y;
// RFC 8259 section 6: number = [ minus ] int [ frac ] [ exp ]
const JSON_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/** The token at or after `from` (past spaces); never throws: a bad string, number or path carries its fault. */
function lexToken(text: string, from: number): Token {
  let at = from;
  while (text.charCodeAt(at) === 0x20) at++;
  if (at >= text.length) return { type: 'end', start: at, end: at };
  const c = text[at]!;
  if (c === '(' || c === ')' || c === '[' || c === ']') return { type: 'punct', start: at, end: at + 1 };
  if (c === '"') return lexString(text, at);
  if (c === '-' || (c >= '0' && c <= '9')) return lexNumber(text, at);
  if (isNameStart(text.charCodeAt(at))) return lexWord(text, at);
  return { type: 'other', start: at, end: at + String.fromCodePoint(text.codePointAt(at)!).length };
}

/** A path or keyword: a name, then names after dots; a name after a dot that starts badly is its fault. */
function lexWord(text: string, start: number): Token {
  let fault: Fault | undefined;
  let end = start + 1;
  for (; end < text.length; end++) {
    const unit = text.charCodeAt(end);
    if (unit === DOT) {
      if (fault === undefined && !isNameStart(text.charCodeAt(end + 1)))
        fault = { at: end + 1, expected: `expected a name after \`.\`: ${NAME_RULE}` };
    } else if (!isNameStart(unit) && !(unit >= 0x30 && unit <= 0x39) && unit !== 0x2d) break;
  }
  return fault === undefined ? { type: 'word', start, end } : { type: 'word', start, end, fault };
}

const DOT = 0x2e;

/** `[A-Za-z_]`: the first character of a name. */
function isNameStart(unit: number): boolean {
  const lower = unit | 0x20;
  return (lower >= 0x61 && lower <= 0x7a) || unit === 0x5f;
}

/** Whether the word `token` is `keyword` (lowercase letters), in any case. */
function isWordOf(text: string, token: Token, keyword: string): boolean {
  if (token.end - token.start !== keyword.length) return false;
  // A letter's two cases differ in 0x20 alone; no other character of a word gives a lowercase letter so.
  for (let i = 0; i < keyword.length; i++)
    if ((text.charCodeAt(token.start + i) | 0x20) !== keyword.charCodeAt(i)) return false;
  return true;
}

function lexNumber(text: string, start: number): Token {
  NUMBER_CHUNK.lastIndex = start;
  const chunk = NUMBER_CHUNK.exec(text)![0];
  const end = start + chunk.length;
  if (!JSON_NUMBER.test(chunk))
    return {
      type: 'number',
      start,
      end,
      fault: { at: start, expected: `expected a JSON number, not ${quote(chunk)}` },
    };
  const value = Number(chunk);
  if (!Number.isFinite(value))
    return { type: 'number', start, end, fault: { at: start, expected: `expected a number a double can hold` } };
  // -0 is 0 here, as it is to `eq`, so the canonical text has one spelling.
  return { type: 'number', start, end, value: value + 0 };
}

/** RFC 8259 section 7: the escapes a JSON string allows, besides `\uXXXX`. */
const ESCAPES: ReadonlyMap<string, string> = new Map([
  ['"', '"'],
  ['\\', '\\'],
  ['/', '/'],
  ['b', '\b'],
  ['f', '\f'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
]);
const HEX4 = /^[0-9A-Fa-f]{4}$/;

function lexString(text: string, start: number): Token {
  let decoded = '';
  let i = start + 1;
  let from = i;
  const faulty = (at: number, expected: string): Token => ({
    type: 'string',
    start,
    end: text.length,
    fault: { at, expected },
  });
  for (;;) {
    if (i >= text.length) return faulty(i, 'expected `"` to close the string');
    const unit = text.charCodeAt(i);
    if (unit === 0x22) break;
    if (unit < 0x20) {
      const hex = unit.toString(16).padStart(4, '0');
      return faulty(i, `expected \`\\u${hex}\` in place of the control character U+${hex.toUpperCase()}`);
    }
    if (unit !== 0x5c) {
      i++;
      continue;
    }
    decoded += text.slice(from, i);
    const escape = decodeEscape(text, i);
    if (escape === undefined)
      return faulty(
        i,
        'expected an escape after `\\`: `\\"`, `\\\\`, `\\/`, `\\b`, `\\f`, `\\n`, `\\r`, `\\t` or `\\u` and four hex digits',
      );
    decoded += escape.text;
    i = from = escape.end;
  }
  // Most strings hold no escape: then the value is one slice, added to nothing.
  return { type: 'string', start, end: i + 1, value: decoded + text.slice(from, i) };
}

/** The escape whose backslash is at `at`: its text and where it ends, or undefined when it is not a JSON escape. */
function decodeEscape(text: string, at: number): { text: string; end: number } | undefined {
  const letter = text[at + 1];
  const simple = letter === undefined ? undefined : ESCAPES.get(letter);
  if (simple !== undefined) return { text: simple, end: at + 2 };
  const hex = text.slice(at + 2, at + 6);
  if (letter !== 'u' || !HEX4.test(hex)) return undefined;
  return { text: String.fromCharCode(parseInt(hex, 16)), end: at + 6 };
}
