/**
 * A placeholder of the JSON Schema validator: `type`, `required`,
 * `properties` and `maxLength` only, enough for the code that applies a
 * schema to be written and tested. The schema branch replaces this file.
 */

/** One way a user breaks the schema. */
export interface SchemaViolation {
  /** The path of the value, in the `a.b` / `tags[3]` form; '' for the user itself. */
  field: string;
  keyword: string;
  /** A sentence a person understands. */
  detail: string;
}

export interface CompiledSchema {
  /** Every violation of `user`; none when it is valid. */
  validate(user: unknown): SchemaViolation[];
}

/** A schema this validator cannot apply: the keyword and its JSON pointer. */
export class SchemaRefusedError extends Error {
  override readonly name = 'SchemaRefusedError';
  constructor(
    readonly keyword: string,
    readonly pointer: string,
    message: string,
  ) {
    super(message);
  }
}

const KNOWN = new Set(['type', 'required', 'properties', 'maxLength', 'title', 'description']);
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

type Check = (value: unknown, field: string, out: SchemaViolation[]) => void;

export function compileSchema(schema: unknown): CompiledSchema {
  const check = compile(schema, '');
  return {
    validate(user) {
      const out: SchemaViolation[] = [];
      check(user, '', out);
      return out;
    },
  };
}

function compile(schema: unknown, pointer: string): Check {
  if (typeof schema === 'boolean') return schema ? () => {} : (_v, field, out) => void out.push(never(field));
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    throw new SchemaRefusedError('', pointer, `the schema at "${pointer}" must be an object or a boolean`);
  const s = schema as Record<string, unknown>;
  for (const key of Object.keys(s))
    if (!KNOWN.has(key))
      throw new SchemaRefusedError(
        key,
        `${pointer}/${key}`,
        `the keyword ${key} at "${pointer}/${key}" is not supported`,
      );
  const checks: Check[] = [];
  if (s.type !== undefined) {
    if (typeof s.type !== 'string' || !TYPES.has(s.type))
      throw new SchemaRefusedError('type', `${pointer}/type`, `type at "${pointer}/type" must name a JSON type`);
    const type = s.type;
    checks.push((v, field, out) => {
      if (!hasType(v, type)) out.push({ field, keyword: 'type', detail: `${label(field)} must be ${article(type)}` });
    });
  }
  if (s.required !== undefined) {
    if (!Array.isArray(s.required) || !s.required.every((r) => typeof r === 'string'))
      throw new SchemaRefusedError('required', `${pointer}/required`, 'required must be an array of strings');
    const required = s.required as string[];
    checks.push((v, field, out) => {
      if (!isObject(v)) return;
      for (const name of required)
        if (!Object.hasOwn(v, name))
          out.push({ field: join(field, name), keyword: 'required', detail: `${join(field, name)} is required` });
    });
  }
  if (s.properties !== undefined) {
    if (!isObject(s.properties))
      throw new SchemaRefusedError('properties', `${pointer}/properties`, 'properties must be an object');
    const props = Object.entries(s.properties).map(
      ([name, sub]) => [name, compile(sub, `${pointer}/properties/${name}`)] as const,
    );
    checks.push((v, field, out) => {
      if (!isObject(v)) return;
      for (const [name, sub] of props) if (Object.hasOwn(v, name)) sub(v[name], join(field, name), out);
    });
  }
  if (s.maxLength !== undefined) {
    const max = s.maxLength;
    if (typeof max !== 'number' || !Number.isInteger(max) || max < 0)
      throw new SchemaRefusedError('maxLength', `${pointer}/maxLength`, 'maxLength must be a non-negative integer');
    checks.push((v, field, out) => {
      if (typeof v === 'string' && [...v].length > max)
        out.push({ field, keyword: 'maxLength', detail: `${label(field)} must be at most ${max} characters long` });
    });
  }
  return (v, field, out) => {
    for (const c of checks) c(v, field, out);
  };
}

function never(field: string): SchemaViolation {
  return { field, keyword: 'false', detail: `${label(field)} is not allowed` };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function hasType(v: unknown, type: string): boolean {
  if (type === 'integer') return Number.isInteger(v);
  if (type === 'array') return Array.isArray(v);
  if (type === 'object') return isObject(v);
  if (type === 'null') return v === null;
  return typeof v === type;
}

function join(field: string, name: string): string {
  return field === '' ? name : `${field}.${name}`;
}

function label(field: string): string {
  return field === '' ? 'the user' : field;
}

function article(type: string): string {
  return type === 'object' || type === 'array' || type === 'integer' ? `an ${type}` : `a ${type}`;
}
