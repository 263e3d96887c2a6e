/**
 * The server's JSON Schema (draft 2020-12) validator for users
 * (docs/schema.md): a schema is checked and compiled once into closures
 * (checks.ts), which then validate any number of users without reading
 * the schema again. Only the keywords docs/schema.md lists are taken; any
 * other keyword, or a keyword whose value is not valid, refuses the whole
 * schema with the keyword and its JSON pointer, so that no constraint an
 * operator wrote is silently ignored.
 */
import {
  ANYTHING,
  anyOfNode,
  arrayNode,
  type ArrayRules,
  everyOf,
  isObject,
  nothing,
  notNode,
  objectNode,
  type ObjectRules,
  oneOfNode,
  refNode,
  ROOT,
  scalarNode,
  type ScalarRules,
  type SchemaNode,
  type SchemaViolation,
  TYPES,
} from './checks.js';
import { FORMAT_NAMES, FORMAT_PHRASES, FORMAT_TESTS, type FormatName } from './formats.js';

export type { SchemaViolation } from './checks.js';

export interface CompiledSchema {
  /** True when `user` is valid: a valid user's only pass, which allocates nothing. */
  test(user: unknown): boolean;
  /** Every violation of the schema by `user`, in the schema's order; [] when it is valid. */
  validate(user: unknown): SchemaViolation[];
  /**
   * False when no value of the member `name` of the user, nor its
   * absence, can change what `validate` says of it: adding that member to
   * an object that lacks it can then be left out. It walks the schema: ask
   * it once.
   */
  readsMember(name: string): boolean;
}

/**
 * A schema the server does not take: `keyword` at `pointer` (a JSON pointer into the schema, '' for the schema itself).
 */
export class SchemaRefusedError extends Error {
  override readonly name = 'SchemaRefusedError';
  constructor(
    readonly keyword: string,
    readonly pointer: string,
    reason: string,
  ) {
    super(`${keyword === '' ? 'the schema' : keyword} at ${pointer === '' ? '/' : pointer} ${reason}`);
  }
}

function refuse(keyword: string, pointer: string, reason: string): never {
  throw new SchemaRefusedError(keyword, pointer, reason);
}

/** The one dialect taken, as `$schema` names it. */
const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** The annotations: taken and kept out of validation. `$schema` and `$id` are taken at the root only. */
const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$comment', '$schema', '$id']);
const ASSERTIONS = new Set([
  'type',
  'enum',
  'const',
  'properties',
  'required',
  'additionalProperties',
  'patternProperties',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'uniqueItems',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'allOf',
  'anyOf',
  'oneOf',
  'not',
  '$defs',
  '$ref',
]);
const BOUNDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'] as const;

/**
 * Subschemas nested deeper than this are refused: compiling and checking
 * recurse once per level, and a user is at most 16 levels deep
 * (shared/user.ts MAX_DEPTH), which a few levels of `allOf` and `$ref`
 * per level of the user stay well within.
 */
const MAX_SCHEMA_DEPTH = 64;

/** RFC 3986 section 4.3's absolute-URI, loosely: a scheme, then no fragment and no white space. */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^#\s]*$/;

/** JSON Pointer (RFC 6901 section 3): `~` is written `~0` and `/` is written `~1`. */
function pointerTo(pointer: string, token: string | number): string {
  return `${pointer}/${String(token).replaceAll('~', '~0').replaceAll('/', '~1')}`;
}

function regexOf(source: string, keyword: string, pointer: string): RegExp {
  try {
    return new RegExp(source, 'u');
  } catch (error) {
    return refuse(keyword, pointer, `is not a valid regular expression: ${(error as Error).message}`);
  }
}

function isNonNegativeInteger(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 0;
}

/**
 * A schema applied to the value itself (by `$ref`, `allOf`, `anyOf`, `oneOf`, `not`), and the `$ref` that leads there,
 * if one does.
 */
interface InPlace {
  readonly to: string;
  readonly ref: string | undefined;
}

/** A `$ref` met while compiling, resolved once every schema location is known. */
interface PendingRef {
  readonly pointer: string;
  readonly target: string;
  readonly resolve: (target: SchemaNode) => void;
}

class SchemaCompiler {
  /** Every schema location of the document, by its JSON pointer, as compiled. */
  private readonly compiled = new Map<string, SchemaNode>();
  /** The same locations as the document writes them. */
  private readonly written = new Map<string, unknown>();
  private readonly refs: PendingRef[] = [];
  private readonly inPlace = new Map<string, InPlace[]>();
  private rootId: string | undefined;

  compile(root: unknown): SchemaNode {
    if (isObject(root) && Object.hasOwn(root, '$id')) this.rootId = this.readId(root.$id);
    const node = this.schema(root, '', '', 0);
    for (const ref of this.refs) {
      const target = this.compiled.get(ref.target);
      if (target === undefined)
        refuse('$ref', ref.pointer, `points at ${ref.target === '' ? '/' : ref.target}, which is not a schema`);
      ref.resolve(target);
    }
    this.refuseEndlessLoops();
    return node;
  }

  /** `$id` at the root: an absolute URI, the base a `$ref` may name the document by. */
  private readId(id: unknown): string {
    const base = typeof id === 'string' ? id.replace(/#$/, '') : '';
    if (!ABSOLUTE_URI.test(base)) refuse('$id', '/$id', 'must be an absolute URI without a fragment');
    return base;
  }

  /** Compiles the schema at `pointer`, which the keyword `holder` holds ('' for the root). */
  private schema(value: unknown, pointer: string, holder: string, depth: number): SchemaNode {
    if (depth > MAX_SCHEMA_DEPTH) refuse(holder, pointer, `nests schemas deeper than ${MAX_SCHEMA_DEPTH} levels`);
    let node: SchemaNode;
    if (value === true) node = ANYTHING;
    else if (value === false) node = nothing(holder === '' || holder === '$defs' ? 'false' : holder);
    else if (isObject(value)) node = this.objectSchema(value, pointer, depth);
    else return refuse(holder, pointer, 'must be a schema: an object, true or false');
    this.compiled.set(pointer, node);
    this.written.set(pointer, value);
    return node;
  }

  /**
   * Whether the member `name` of the user can change what the schema says
   * of it: the schemas applied to the user itself (the root, and those its
   * `allOf`, `anyOf`, `oneOf`, `not` and `$ref` apply in place) are the
   * only ones that see the user's members, and of their keywords only
   * `properties`, `required`, `patternProperties`,
   * `additionalProperties`, `enum` and `const` look at a member; `type`
   * sees an object either way, and the other keywords apply to strings,
   * numbers and arrays only.
   */
  readsMember(name: string): boolean {
    const seen = new Set<string>();
    const pending = [''];
    for (let pointer = pending.pop(); pointer !== undefined; pointer = pending.pop()) {
      if (seen.has(pointer)) continue;
      seen.add(pointer);
      const schema = this.written.get(pointer);
      if (isObject(schema) && readsOwnMember(schema, name)) return true;
      for (const edge of this.inPlace.get(pointer) ?? []) pending.push(edge.to);
    }
    return false;
  }

  private objectSchema(schema: Record<string, unknown>, pointer: string, depth: number): SchemaNode {
    for (const keyword of Object.keys(schema)) this.readAnnotation(schema, keyword, pointer);
    const at = (keyword: string) => pointerTo(pointer, keyword);
    const has = (keyword: string) => Object.hasOwn(schema, keyword);
    const sub = (value: unknown, keyword: string, token?: string | number) =>
      this.schema(value, token === undefined ? at(keyword) : pointerTo(at(keyword), token), keyword, depth + 1);

    const scalar: ScalarRules = {};
    if (has('type')) scalar.type = this.readTypes(schema.type, at('type'));
    if (has('enum')) {
      if (!Array.isArray(schema.enum)) refuse('enum', at('enum'), 'must be an array of the values allowed');
      scalar.enum = schema.enum;
    }
    if (has('const')) scalar.const = { value: schema.const };
    scalar.minLength = this.readCount(schema, 'minLength', pointer);
    scalar.maxLength = this.readCount(schema, 'maxLength', pointer);
    if (has('pattern')) {
      const source = schema.pattern;
      if (typeof source !== 'string') refuse('pattern', at('pattern'), 'must be a regular expression, as a string');
      scalar.pattern = { source, regex: regexOf(source, 'pattern', at('pattern')) };
    }
    if (has('format')) {
      const format = schema.format as FormatName;
      if (!FORMAT_NAMES.includes(format))
        refuse('format', at('format'), `must be one of the formats checked: ${FORMAT_NAMES.join(', ')}`);
      scalar.format = { test: FORMAT_TESTS[format], phrase: FORMAT_PHRASES[format] };
    }
    for (const keyword of BOUNDS) {
      if (!has(keyword)) continue;
      const bound = schema[keyword];
      if (typeof bound !== 'number') refuse(keyword, at(keyword), 'must be a number');
      scalar[keyword] = bound;
    }
    if (has('multipleOf')) {
      const divisor = schema.multipleOf;
      if (typeof divisor !== 'number' || divisor <= 0)
        refuse('multipleOf', at('multipleOf'), 'must be a number above 0');
      scalar.multipleOf = divisor;
    }

    const array: ArrayRules = { prefixItems: [], uniqueItems: false };
    if (has('prefixItems'))
      array.prefixItems = this.readSchemaList(schema.prefixItems, 'prefixItems', pointer).map((item, i) =>
        sub(item, 'prefixItems', i),
      );
    if (has('items')) {
      if (Array.isArray(schema.items))
        refuse('items', at('items'), 'must be one schema (in draft 2020-12, a list of schemas is prefixItems)');
      array.items = sub(schema.items, 'items');
    }
    array.minItems = this.readCount(schema, 'minItems', pointer);
    array.maxItems = this.readCount(schema, 'maxItems', pointer);
    if (has('uniqueItems')) {
      if (typeof schema.uniqueItems !== 'boolean') refuse('uniqueItems', at('uniqueItems'), 'must be true or false');
      array.uniqueItems = schema.uniqueItems;
    }

    const object: ObjectRules & { properties: Map<string, SchemaNode> } = {
      required: has('required') ? this.readNames(schema.required, at('required')) : [],
      properties: new Map(),
      patternProperties: [],
    };
    if (has('properties'))
      for (const [name, value] of this.readSchemaMap(schema.properties, 'properties', pointer))
        object.properties.set(name, sub(value, 'properties', name));
    if (has('patternProperties'))
      object.patternProperties = this.readSchemaMap(schema.patternProperties, 'patternProperties', pointer).map(
        ([source, value]) => ({
          regex: regexOf(source, 'patternProperties', pointerTo(at('patternProperties'), source)),
          node: sub(value, 'patternProperties', source),
        }),
      );
    if (has('additionalProperties'))
      object.additionalProperties = sub(schema.additionalProperties, 'additionalProperties');

    // A `type` of "object" alone (or "array") is checked by the object's node (the array's): one call less a value.
    const onlyType = Object.entries(scalar).every(([keyword, value]) => keyword === 'type' || value === undefined);
    const typedAs = onlyType && scalar.type?.length === 1 ? scalar.type[0] : undefined;
    const arrays = arrayNode(array, typedAs === 'array');
    const objects = objectNode(object, typedAs === 'object');
    const typeChecked =
      (typedAs === 'array' && arrays !== undefined) || (typedAs === 'object' && objects !== undefined);
    const parts = [typeChecked ? undefined : scalarNode(scalar), arrays, objects].filter(
      (part): part is SchemaNode => part !== undefined,
    );
    const inPlace: InPlace[] = [];
    for (const keyword of ['allOf', 'anyOf', 'oneOf'] as const) {
      if (!has(keyword)) continue;
      const list = this.readSchemaList(schema[keyword], keyword, pointer);
      const nodes = list.map((item, i) => sub(item, keyword, i));
      inPlace.push(...list.map((_, i) => ({ to: pointerTo(at(keyword), i), ref: undefined })));
      parts.push(keyword === 'allOf' ? everyOf(nodes) : keyword === 'anyOf' ? anyOfNode(nodes) : oneOfNode(nodes));
    }
    if (has('not')) {
      parts.push(notNode(sub(schema.not, 'not')));
      inPlace.push({ to: at('not'), ref: undefined });
    }
    if (has('$defs'))
      for (const [name, value] of this.readSchemaMap(schema.$defs, '$defs', pointer)) sub(value, '$defs', name);
    if (has('$ref')) {
      const target = this.readRef(schema.$ref, at('$ref'));
      const { node, resolve } = refNode();
      this.refs.push({ pointer: at('$ref'), target, resolve });
      inPlace.push({ to: target, ref: at('$ref') });
      parts.push(node);
    }
    if (inPlace.length > 0) this.inPlace.set(pointer, inPlace);
    return everyOf(parts);
  }

  /** Refuses a keyword outside the list, and an annotation whose value is not of its kind. */
  private readAnnotation(node: Record<string, unknown>, keyword: string, pointer: string): void {
    const at = pointerTo(pointer, keyword);
    if (ASSERTIONS.has(keyword)) return;
    if (!ANNOTATIONS.has(keyword))
      refuse(keyword, at, 'is not a keyword this server supports (docs/schema.md lists them), so it cannot be checked');
    const value = node[keyword];
    if ((keyword === '$schema' || keyword === '$id') && pointer !== '')
      refuse(keyword, at, 'is taken at the root of the schema only');
    if (keyword === '$schema' && value !== DIALECT && value !== `${DIALECT}#`)
      refuse(keyword, at, `must be ${DIALECT}, the one dialect this server supports`);
    if ((keyword === 'title' || keyword === 'description' || keyword === '$comment') && typeof value !== 'string')
      refuse(keyword, at, 'must be a string');
    if (keyword === 'examples' && !Array.isArray(value)) refuse(keyword, at, 'must be an array');
  }

  private readTypes(value: unknown, at: string): string[] {
    const names = Array.isArray(value) ? value : [value];
    if (names.length === 0) refuse('type', at, 'must name at least one type');
    for (const name of names) {
      if (typeof name !== 'string' || !TYPES.has(name))
        refuse('type', at, `${JSON.stringify(name)} is not a type; the types are ${[...TYPES.keys()].join(', ')}`);
    }
    if (new Set(names).size !== names.length) refuse('type', at, 'names a type twice');
    return names as string[];
  }

  private readCount(node: Record<string, unknown>, keyword: string, pointer: string): number | undefined {
    if (!Object.hasOwn(node, keyword)) return undefined;
    const value = node[keyword];
    if (!isNonNegativeInteger(value)) refuse(keyword, pointerTo(pointer, keyword), 'must be an integer of 0 or more');
    return value;
  }

  private readNames(value: unknown, at: string): string[] {
    if (!Array.isArray(value) || !value.every((name) => typeof name === 'string'))
      refuse('required', at, 'must be an array of member names');
    if (new Set(value).size !== value.length) refuse('required', at, 'names a member twice');
    return value as string[];
  }

  private readSchemaList(value: unknown, keyword: string, pointer: string): unknown[] {
    if (!Array.isArray(value) || value.length === 0)
      refuse(keyword, pointerTo(pointer, keyword), 'must be a non-empty array of schemas');
    return value;
  }

  private readSchemaMap(value: unknown, keyword: string, pointer: string): Array<[string, unknown]> {
    if (!isObject(value)) refuse(keyword, pointerTo(pointer, keyword), 'must be an object of schemas');
    return Object.entries(value);
  }

  /**
   * The JSON pointer a `$ref` names: a fragment of this document (`#`,
   * `#/$defs/name`, percent-encoded as a URI fragment), or the root's
   * `$id` followed by one. Anything else would need another document, or
   * an anchor, which this server does not look up.
   */
  private readRef(value: unknown, at: string): string {
    if (typeof value !== 'string') return refuse('$ref', at, 'must be a string');
    let reference = value;
    const id = this.rootId;
    if (id !== undefined && value.startsWith(id) && (value.length === id.length || value[id.length] === '#'))
      reference = value.slice(id.length);
    if (reference === '') return '';
    if (!reference.startsWith('#'))
      refuse('$ref', at, `"${value}" names another document; a $ref points within the schema, such as #/$defs/name`);
    let fragment: string;
    try {
      fragment = decodeURIComponent(reference.slice(1));
    } catch {
      return refuse('$ref', at, `"${value}" is not a well-formed URI fragment`);
    }
    if (fragment !== '' && !fragment.startsWith('/'))
      refuse(
        '$ref',
        at,
        `"${value}" names an anchor, which this server does not support; use a JSON pointer such as #/$defs/name`,
      );
    if (/~(?![01])/.test(fragment))
      refuse('$ref', at, `"${value}" is not a JSON pointer: ~ is written ~0 and / is written ~1`);
    return fragment;
  }

  /**
   * Refuses a schema that applies itself to the same value again through
   * `$ref` (`{"$ref": "#"}`, two $defs naming each other), without
   * stepping into a member or an item: checking it would never end. Every
   * other way back to a schema steps one level into the value, which is
   * finite, so validation always ends.
   */
  private refuseEndlessLoops(): void {
    const done = new Set<string>();
    for (const start of this.inPlace.keys()) {
      if (done.has(start)) continue;
      // A depth-first walk with its own stack: the path from `start`, each step with the edges still to follow.
      const path: Array<{ pointer: string; via: InPlace | undefined; next: number }> = [];
      const onPath = new Set<string>();
      const enter = (pointer: string, via: InPlace | undefined) => {
        path.push({ pointer, via, next: 0 });
        onPath.add(pointer);
      };
      enter(start, undefined);
      while (path.length > 0) {
        const step = path[path.length - 1]!;
        const edges = this.inPlace.get(step.pointer) ?? [];
        const edge = edges[step.next++];
        if (edge === undefined) {
          path.pop();
          onPath.delete(step.pointer);
          done.add(step.pointer);
          continue;
        }
        if (onPath.has(edge.to)) {
          const from = path.findIndex((entry) => entry.pointer === edge.to);
          const loop = [...path.slice(from + 1).map((entry) => entry.via), edge];
          const ref = loop.find((entry) => entry?.ref !== undefined)!.ref!;
          refuse('$ref', ref, 'leads back to the same schema for the same value, so checking it would never end');
        }
        if (!done.has(edge.to)) enter(edge.to, edge);
      }
    }
  }
}

/** Whether one schema object's own keywords look at the member `name` of an object (its subschemas aside). */
function readsOwnMember(schema: Record<string, unknown>, name: string): boolean {
  if (Object.hasOwn(schema, 'enum') || Object.hasOwn(schema, 'const')) return true;
  if (Object.hasOwn(schema, 'additionalProperties') && schema.additionalProperties !== true) return true;
  if ((schema.required as string[] | undefined)?.includes(name) === true) return true;
  if (isObject(schema.properties) && Object.hasOwn(schema.properties, name)) return true;
  const patterns = isObject(schema.patternProperties) ? Object.keys(schema.patternProperties) : [];
  return patterns.some((source) => new RegExp(source, 'u').test(name));
}

/** Compiles a JSON Schema (draft 2020-12, the keywords of docs/schema.md); throws SchemaRefusedError. */
export function compileSchema(schema: unknown): CompiledSchema {
  const compiler = new SchemaCompiler();
  const root = compiler.compile(schema);
  return {
    test: root.test,
    readsMember: (name) => compiler.readsMember(name),
    validate(user: unknown): SchemaViolation[] {
      if (root.test(user)) return [];
      const violations: SchemaViolation[] = [];
      root.report(user, violations, ROOT);
      // The two passes are written apart (checks.ts); a failure they disagree on is a fault here, not the user's.
      if (violations.length === 0) throw new Error('the schema validator failed a user, then found no violation');
      return violations;
    },
  };
}
