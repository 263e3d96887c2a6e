/**
 * What a compiled schema is made of: a node per schema location, built
 * from its keywords' values (already checked) when the schema is compiled
 * (compile-schema.ts). Validating a value runs the nodes; nothing reads
 * the schema object again.
 *
 * Each node has two passes. `test` answers valid or not, stops at the
 * first failure and allocates nothing: it is a valid user's only pass.
 * `report` runs only on a value `test` failed, and pushes every violation
 * with the value's place in the user, from which its `field` is written.
 *
 * Speed: under callgrind, a closure per keyword cost a 10-property user
 * (five formats, lengths, an enum, a nested object) about 15,000
 * instructions, most of them calls the JIT cannot inline (every keyword's
 * closure shares one call site) and member reads by a name that changes
 * (megamorphic loads). So `test` is fused: one closure for all of a
 * node's scalar keywords, one for its array keywords, one for its object
 * keywords, which reads the members in one `for...in` pass. The same user
 * costs 7,600, of which the five formats take 4,000.
 */
import { sameJson } from '../../../shared/merge-patch.js';
import { countCodePoints } from '../code-points.js';

/** One way a user breaks the schema: where, which keyword, and a sentence that says so. */
export interface SchemaViolation {
  /**
   * The path of the value in the user, `a.b` and `tags[3]` as in every `invalid-user` problem; '' is the user itself.
   */
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

/** A compiled schema, or a part of one (its scalar, array or object keywords, one applicator). */
export interface SchemaNode {
  /** True when `value` passes; stops at the first failure and allocates nothing. */
  readonly test: (value: unknown) => boolean;
  /** Pushes every violation of `value`, which sits at `at`, to `out`; nothing when it passes. */
  readonly report: (value: unknown, out: SchemaViolation[], at: Place) => void;
}

/** Every node is made here, so all have one shape and a read of `.test` stays monomorphic. */
function nodeOf(test: SchemaNode['test'], report: SchemaNode['report']): SchemaNode {
  return { test, report };
}

type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function childAt(at: Place, key: string | number): Place {
  return { parent: at, key };
}

/** The `a.b` / `tags[3]` path of a place. */
function fieldOf(at: Place): string {
  if (at.parent === undefined) return '';
  const parent = fieldOf(at.parent);
  if (typeof at.key === 'number') return `${parent}[${at.key}]`;
  return parent === '' ? at.key : `${parent}.${at.key}`;
}

/** Records a violation at `at` whose detail is the value's name followed by `predicate` ("must be at least 0"). */
function push(out: SchemaViolation[], at: Place, keyword: string, predicate: string): void {
  const field = fieldOf(at);
  out.push({ field, keyword, detail: `${field === '' ? 'the user' : field} ${predicate}` });
}

/** Reports `node`'s violations of `value`, testing first: a passing member costs its fast pass only. */
function reportFailing(node: SchemaNode, value: unknown, out: SchemaViolation[], at: Place): void {
  if (!node.test(value)) node.report(value, out, at);
}

export const ANYTHING: SchemaNode = nodeOf(
  () => true,
  () => {},
);

/** The `false` schema, held by `keyword`: whatever value is there is refused. */
export function nothing(keyword: string): SchemaNode {
  return nodeOf(
    () => false,
    (_value, out, at) => push(out, at, keyword, 'is not allowed'),
  );
}

/** A node whose value must pass every one of `parts`: a schema's parts, or `allOf`. */
export function everyOf(parts: readonly SchemaNode[]): SchemaNode {
  if (parts.length === 0) return ANYTHING;
  if (parts.length === 1) return parts[0]!;
  const tests = parts.map((part) => part.test);
  const report: SchemaNode['report'] = (value, out, at) => {
    for (const part of parts) reportFailing(part, value, out, at);
  };
  const [a, b, c] = tests as [SchemaNode['test'], SchemaNode['test'], SchemaNode['test']];
  if (tests.length === 2) return nodeOf((value) => a(value) && b(value), report);
  if (tests.length === 3) return nodeOf((value) => a(value) && b(value) && c(value), report);
  return nodeOf((value) => {
    for (const test of tests) if (!test(value)) return false;
    return true;
  }, report);
}

// The kinds of JSON value, as bits: `type` is a mask of them, and an
// integer is both a number and an integer (1.0 included: JSON has one kind
// of number).
const NULL = 1;
const BOOLEAN = 2;
const OBJECT = 4;
const ARRAY = 8;
const NUMBER = 16;
const INTEGER = 32;
const STRING = 64;

/**
 * The kind of a value, by `typeof` comparisons, which the JIT turns into checks of the value's map (a `switch` calls a
 * builtin).
 */
function kindOf(value: unknown): number {
  if (typeof value === 'string') return STRING;
  if (typeof value === 'number') return Number.isInteger(value) ? NUMBER | INTEGER : NUMBER;
  if (typeof value === 'boolean') return BOOLEAN;
  if (typeof value !== 'object') return 0;
  if (value === null) return NULL;
  return Array.isArray(value) ? ARRAY : OBJECT;
}

/** The seven names of `type`, each with its kind and the noun of its sentence. */
export const TYPES: ReadonlyMap<string, { kind: number; noun: string }> = new Map([
  ['null', { kind: NULL, noun: 'null' }],
  ['boolean', { kind: BOOLEAN, noun: 'true or false' }],
  ['object', { kind: OBJECT, noun: 'an object' }],
  ['array', { kind: ARRAY, noun: 'an array' }],
  ['number', { kind: NUMBER, noun: 'a number' }],
  ['string', { kind: STRING, noun: 'a string' }],
  ['integer', { kind: INTEGER, noun: 'an integer' }],
]);

/** "a, b or c". */
function orList(words: readonly string[]): string {
  return words.length === 1 ? words[0]! : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/** A value as a sentence shows it: a plain word as it is, anything else as JSON. */
function shown(value: unknown): string {
  return typeof value === 'string' && /^[^\s,"](?:[^,"]*[^\s,"])?$/.test(value) ? value : JSON.stringify(value);
}

const SHOWN_VALUES = 20;

/**
 * `enum` by JSON equality: a scalar is a Set lookup (1 and 1.0 are one value), an object matches whatever its members'
 * order.
 */
function enumTest(values: readonly unknown[]): (value: unknown) => boolean {
  const scalars = new Set(values.filter((value) => typeof value !== 'object' || value === null));
  const composites = values.filter((value) => typeof value === 'object' && value !== null);
  return (value) => {
    if (typeof value !== 'object' || value === null) return scalars.has(value);
    for (const candidate of composites) if (sameJson(candidate, value)) return true;
    return false;
  };
}

function enumPredicate(values: readonly unknown[]): string {
  if (values.length === 0) return 'cannot take any value (the schema gives an empty enum)';
  const listed = values.slice(0, SHOWN_VALUES).map(shown).join(', ');
  return `must be one of: ${listed}${values.length > SHOWN_VALUES ? `, … (${values.length} values)` : ''}`;
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
function multipleTest(divisor: number): (value: number) => boolean {
  const d = decimalOf(divisor);
  return (value) => {
    if (Number.isSafeInteger(value) && Number.isSafeInteger(divisor)) return value % divisor === 0;
    const v = decimalOf(value);
    const exponent = Math.min(v.exponent, d.exponent);
    const scaled = (x: { digits: bigint; exponent: number }) => x.digits * 10n ** BigInt(x.exponent - exponent);
    return scaled(v) % scaled(d) === 0n;
  };
}

/** A string's length in code points is within [min, max]: UTF-16 units bound it, so most strings are never counted. */
function lengthWithin(text: string, min: number, max: number): boolean {
  const units = text.length;
  if (units < min) return false;
  if (units <= max && units >= 2 * min) return true;
  const count = countCodePoints(text);
  return count >= min && count <= max;
}

function characters(count: number): string {
  return count === 1 ? '1 character' : `${count} characters`;
}

/** The keywords of a schema that look at a value itself; undefined where the schema does not have one. */
export interface ScalarRules {
  type?: readonly string[];
  enum?: readonly unknown[];
  const?: { value: unknown };
  minLength?: number;
  maxLength?: number;
  pattern?: { source: string; regex: RegExp };
  format?: { test: (text: string) => boolean; phrase: string };
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
}

/** One keyword as the reporting pass sees it: its test, and the sentence it says on failure. */
interface Rule {
  keyword: string;
  passes: (value: unknown) => boolean;
  predicate: string;
}

/** The four bounds on a number: the comparison that passes, and the words of its sentence. */
const BOUNDS = {
  minimum: { passes: (value: number, bound: number) => value >= bound, words: 'must be at least' },
  maximum: { passes: (value: number, bound: number) => value <= bound, words: 'must be at most' },
  exclusiveMinimum: { passes: (value: number, bound: number) => value > bound, words: 'must be greater than' },
  exclusiveMaximum: { passes: (value: number, bound: number) => value < bound, words: 'must be less than' },
} as const;

/** The reporting pass's rules of `ScalarRules`, in the order its violations are listed. */
function scalarRulesOf(rules: ScalarRules): Rule[] {
  const list: Rule[] = [];
  const ofStrings = (keyword: string, passes: (text: string) => boolean, predicate: string) =>
    list.push({ keyword, passes: (value) => typeof value !== 'string' || passes(value), predicate });
  const ofNumbers = (keyword: string, passes: (number: number) => boolean, predicate: string) =>
    list.push({ keyword, passes: (value) => typeof value !== 'number' || passes(value), predicate });
  if (rules.type !== undefined) {
    const mask = rules.type.reduce((bits, name) => bits | TYPES.get(name)!.kind, 0);
    const nouns = rules.type.map((name) => TYPES.get(name)!.noun);
    list.push({
      keyword: 'type',
      passes: (value) => (kindOf(value) & mask) !== 0,
      predicate: `must be ${orList(nouns)}`,
    });
  }
  if (rules.enum !== undefined)
    list.push({ keyword: 'enum', passes: enumTest(rules.enum), predicate: enumPredicate(rules.enum) });
  if (rules.const !== undefined) {
    const expected = rules.const.value;
    list.push({
      keyword: 'const',
      passes: (value) => sameJson(value, expected),
      predicate: `must be ${shown(expected)}`,
    });
  }
  const { minLength: min, maxLength: max, pattern, format } = rules;
  if (min !== undefined)
    ofStrings('minLength', (text) => lengthWithin(text, min, Infinity), `must have at least ${characters(min)}`);
  if (max !== undefined)
    ofStrings('maxLength', (text) => lengthWithin(text, 0, max), `must have at most ${characters(max)}`);
  if (pattern !== undefined)
    ofStrings('pattern', (text) => pattern.regex.test(text), `must match the pattern ${pattern.source}`);
  if (format !== undefined) ofStrings('format', format.test, `must be ${format.phrase}`);
  for (const keyword of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'] as const) {
    const bound = rules[keyword];
    if (bound === undefined) continue;
    const { passes, words } = BOUNDS[keyword];
    ofNumbers(keyword, (number) => passes(number, bound), `${words} ${bound}`);
  }
  if (rules.multipleOf !== undefined)
    ofNumbers('multipleOf', multipleTest(rules.multipleOf), `must be a multiple of ${rules.multipleOf}`);
  return list;
}

/** A string's keywords, the fast pass: absent ones are given values that always pass. */
interface StringLimits {
  minLength: number;
  maxLength: number;
  pattern: RegExp | undefined;
  format: ((text: string) => boolean) | undefined;
}

function passesString(text: string, limits: StringLimits): boolean {
  const { minLength, maxLength, pattern, format } = limits;
  return (
    lengthWithin(text, minLength, maxLength) &&
    (pattern === undefined || pattern.test(text)) &&
    (format === undefined || format(text))
  );
}

/** A number's keywords, the fast pass. JSON numbers are finite: ±Infinity as a bound passes every one. */
interface NumberLimits {
  minimum: number;
  maximum: number;
  above: number;
  below: number;
  isMultiple: ((value: number) => boolean) | undefined;
}

function passesNumber(value: number, limits: NumberLimits): boolean {
  return (
    value >= limits.minimum &&
    value <= limits.maximum &&
    value > limits.above &&
    value < limits.below &&
    (limits.isMultiple === undefined || limits.isMultiple(value))
  );
}

/**
 * The fast pass of a schema's scalar keywords. The usual schema of a
 * field (a string with lengths or a format, an integer with bounds, a
 * type, an enum) gets a closure of its own that tests nothing else.
 */
function scalarTestOf(rules: ScalarRules): (value: unknown) => boolean {
  const types = rules.type === undefined ? -1 : rules.type.reduce((bits, name) => bits | TYPES.get(name)!.kind, 0);
  const inEnum = rules.enum === undefined ? undefined : enumTest(rules.enum);
  const hasConst = rules.const !== undefined;
  const expected = rules.const?.value;
  const strings: StringLimits = {
    minLength: rules.minLength ?? 0,
    maxLength: rules.maxLength ?? Infinity,
    pattern: rules.pattern?.regex,
    format: rules.format?.test,
  };
  const onStrings = [rules.minLength, rules.maxLength, rules.pattern, rules.format].some((rule) => rule !== undefined);
  const numbers: NumberLimits = {
    minimum: rules.minimum ?? -Infinity,
    maximum: rules.maximum ?? Infinity,
    above: rules.exclusiveMinimum ?? -Infinity,
    below: rules.exclusiveMaximum ?? Infinity,
    isMultiple: rules.multipleOf === undefined ? undefined : multipleTest(rules.multipleOf),
  };
  const onNumbers = [
    rules.minimum,
    rules.maximum,
    rules.exclusiveMinimum,
    rules.exclusiveMaximum,
    rules.multipleOf,
  ].some((rule) => rule !== undefined);
  if (inEnum === undefined && !hasConst) {
    if (types === STRING) return (value) => typeof value === 'string' && passesString(value, strings);
    if (types === INTEGER && !onStrings)
      return (value) => typeof value === 'number' && Number.isInteger(value) && passesNumber(value, numbers);
    if ((types === NUMBER || types === (NUMBER | INTEGER)) && !onStrings)
      return (value) => typeof value === 'number' && passesNumber(value, numbers);
    if (types !== -1 && !onStrings && !onNumbers) return (value) => (kindOf(value) & types) !== 0;
  }
  if (inEnum !== undefined && types === -1 && !hasConst && !onStrings && !onNumbers) return inEnum;
  return (value) => {
    if (types !== -1 && (kindOf(value) & types) === 0) return false;
    if (inEnum !== undefined && !inEnum(value)) return false;
    if (hasConst && !sameJson(value, expected)) return false;
    if (typeof value === 'string') return !onStrings || passesString(value, strings);
    if (typeof value === 'number') return !onNumbers || passesNumber(value, numbers);
    return true;
  };
}

/** The node of a schema's scalar keywords, or undefined when it has none. */
export function scalarNode(rules: ScalarRules): SchemaNode | undefined {
  const list = scalarRulesOf(rules);
  if (list.length === 0) return undefined;
  return nodeOf(scalarTestOf(rules), (value, out, at) => {
    for (const rule of list) if (!rule.passes(value)) push(out, at, rule.keyword, rule.predicate);
  });
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

function items(count: number): string {
  return count === 1 ? '1 item' : `${count} items`;
}

/** The keywords of a schema that look at an array's items. */
export interface ArrayRules {
  prefixItems: readonly SchemaNode[];
  items?: SchemaNode;
  minItems?: number;
  maxItems?: number;
  uniqueItems: boolean;
}

/**
 * The node of a schema's array keywords, or undefined when it has none; `typed`: the schema's `type` is "array" and
 * nothing else, checked here.
 */
export function arrayNode(rules: ArrayRules, typed: boolean): SchemaNode | undefined {
  const { prefixItems, items: rest, uniqueItems } = rules;
  if (prefixItems.length === 0 && rest === undefined && !uniqueItems) {
    if (rules.minItems === undefined && rules.maxItems === undefined) return undefined;
  }
  const minItems = rules.minItems ?? 0;
  const maxItems = rules.maxItems ?? Infinity;
  const test = (value: unknown): boolean => {
    if (!Array.isArray(value)) return !typed;
    const count = value.length;
    if (count < minItems || count > maxItems) return false;
    const prefix = Math.min(count, prefixItems.length);
    for (let i = 0; i < prefix; i++) if (!prefixItems[i]!.test(value[i])) return false;
    if (rest !== undefined) for (let i = prefixItems.length; i < count; i++) if (!rest.test(value[i])) return false;
    return !uniqueItems || firstRepeat(value) === undefined;
  };
  return nodeOf(test, (value, out, at) => {
    if (!Array.isArray(value)) {
      if (typed) push(out, at, 'type', `must be ${TYPES.get('array')!.noun}`);
      return;
    }
    value.forEach((item, i) => {
      const node = i < prefixItems.length ? prefixItems[i] : rest;
      if (node !== undefined) reportFailing(node, item, out, childAt(at, i));
    });
    if (value.length < minItems) push(out, at, 'minItems', `must have at least ${items(minItems)}`);
    if (value.length > maxItems) push(out, at, 'maxItems', `must have at most ${items(maxItems)}`);
    const repeat = uniqueItems ? firstRepeat(value) : undefined;
    if (repeat !== undefined) {
      const [first, second] = repeat.map((index) => fieldOf(childAt(at, index)));
      push(out, at, 'uniqueItems', `must not hold the same item twice (${first} and ${second} are equal)`);
    }
  });
}

/** The keywords of a schema that look at an object's members. */
export interface ObjectRules {
  required: readonly string[];
  properties: ReadonlyMap<string, SchemaNode>;
  patternProperties: ReadonlyArray<{ regex: RegExp; node: SchemaNode }>;
  additionalProperties?: SchemaNode;
}

/** What one member name is to a schema: whether it is required, and its node in `properties`. */
interface MemberSlot {
  required: number;
  node: SchemaNode | undefined;
}

/**
 * The node of a schema's object keywords, or undefined when it has none;
 * `typed`: the schema's `type` is "object" and nothing else, checked here.
 * The fast pass reads the object's members once, with `for...in`: a
 * member's name looked up in one Map tells its `properties` node and
 * whether it is required, and `value[name]` there is a read the JIT makes
 * by the object's layout. A parsed JSON object's prototype is
 * Object.prototype, which has no enumerable members, so `for...in` visits
 * its own members only.
 */
export function objectNode(rules: ObjectRules, typed: boolean): SchemaNode | undefined {
  const { required, properties, patternProperties: patterns, additionalProperties: additional } = rules;
  if (required.length === 0 && properties.size === 0 && patterns.length === 0 && additional === undefined)
    return undefined;
  const slots = new Map<string, MemberSlot>();
  for (const [name, node] of properties) slots.set(name, { required: 0, node });
  for (const name of required) {
    const slot = slots.get(name);
    if (slot === undefined) slots.set(name, { required: 1, node: undefined });
    else slot.required = 1;
  }
  // The names of the last object tested, by position, with their slots: users written by one client
  // give their members in one order, and comparing a name with the one at its place the last time is
  // a pointer comparison (names from JSON.parse are internalized), where a Map lookup hashes and probes
  // (about 60 instructions a member under callgrind). Another order only costs the lookups again.
  const lastNames: string[] = [];
  const lastSlots: Array<MemberSlot | undefined> = [];
  const test = (value: unknown): boolean => {
    if (!isObject(value)) return !typed;
    let found = 0;
    let position = 0;
    for (const name in value) {
      let slot: MemberSlot | undefined;
      if (position < lastNames.length && lastNames[position] === name) slot = lastSlots[position];
      else {
        slot = slots.get(name);
        lastNames[position] = name;
        lastSlots[position] = slot;
      }
      position++;
      let known = false;
      if (slot !== undefined) {
        found += slot.required;
        if (slot.node !== undefined) {
          known = true;
          if (!slot.node.test(value[name])) return false;
        }
      }
      for (let i = 0; i < patterns.length; i++) {
        if (!patterns[i]!.regex.test(name)) continue;
        known = true;
        if (!patterns[i]!.node.test(value[name])) return false;
      }
      if (!known && additional !== undefined && !additional.test(value[name])) return false;
    }
    return found === required.length;
  };
  return nodeOf(test, (value, out, at) => {
    if (!isObject(value)) {
      if (typed) push(out, at, 'type', `must be ${TYPES.get('object')!.noun}`);
      return;
    }
    for (const name of required)
      if (!Object.hasOwn(value, name)) push(out, childAt(at, name), 'required', 'is required');
    for (const name of Object.keys(value)) {
      const member = value[name];
      const place = childAt(at, name);
      const node = properties.get(name);
      if (node !== undefined) reportFailing(node, member, out, place);
      const matching = patterns.filter(({ regex }) => regex.test(name));
      for (const pattern of matching) reportFailing(pattern.node, member, out, place);
      if (node === undefined && matching.length === 0 && additional !== undefined)
        reportFailing(additional, member, out, place);
    }
  });
}

const SHOWN_ALTERNATIVES = 5;

/** What each alternative of `anyOf` or `oneOf` says of the value, for the sentence that says none fits. */
function alternatives(nodes: readonly SchemaNode[], value: unknown, at: Place): string {
  const said = nodes.slice(0, SHOWN_ALTERNATIVES).map((node) => {
    const out: SchemaViolation[] = [];
    node.report(value, out, at);
    return out.map((violation) => violation.detail).join(' and ');
  });
  return said.join('; or ') + (nodes.length > SHOWN_ALTERNATIVES ? '; or …' : '');
}

export function anyOfNode(nodes: readonly SchemaNode[]): SchemaNode {
  const tests = nodes.map((node) => node.test);
  return nodeOf(
    (value) => {
      for (const test of tests) if (test(value)) return true;
      return false;
    },
    (value, out, at) => push(out, at, 'anyOf', `must satisfy one of: ${alternatives(nodes, value, at)}`),
  );
}

/** The indexes of the first two of `nodes` that `value` passes; -1 for each not found. */
function firstTwoPassed(nodes: readonly SchemaNode[], value: unknown): [number, number] {
  let first = -1;
  for (let i = 0; i < nodes.length; i++) {
    if (!nodes[i]!.test(value)) continue;
    if (first !== -1) return [first, i];
    first = i;
  }
  return [first, -1];
}

/** Whether `value` passes exactly one of `nodes`: the fast pass of `oneOf`, which builds no pair of indexes. */
function passesExactlyOne(nodes: readonly SchemaNode[], value: unknown): boolean {
  let passed = 0;
  for (let i = 0; i < nodes.length && passed < 2; i++) if (nodes[i]!.test(value)) passed++;
  return passed === 1;
}

export function oneOfNode(nodes: readonly SchemaNode[]): SchemaNode {
  return nodeOf(
    (value) => passesExactlyOne(nodes, value),
    (value, out, at) => {
      const [first, second] = firstTwoPassed(nodes, value);
      if (first === -1) push(out, at, 'oneOf', `must satisfy one of: ${alternatives(nodes, value, at)}`);
      else if (second !== -1) {
        const both = `it satisfies both schema ${first + 1} and schema ${second + 1}`;
        push(out, at, 'oneOf', `must satisfy exactly one of the oneOf schemas; ${both}`);
      }
    },
  );
}

export function notNode(node: SchemaNode): SchemaNode {
  return nodeOf(
    (value) => !node.test(value),
    (_value, out, at) => push(out, at, 'not', 'must not satisfy the schema under not'),
  );
}

/** A `$ref`'s node, which checks with its target once `resolve` has been given it. */
export function refNode(): { node: SchemaNode; resolve: (target: SchemaNode) => void } {
  let target = ANYTHING;
  return {
    node: nodeOf(
      (value) => target.test(value),
      (value, out, at) => target.report(value, out, at),
    ),
    resolve: (node) => {
      target = node;
    },
  };
}
