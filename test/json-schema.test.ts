/**
 * The schema validator's own promises (docs/schema.md), beyond the Test
 * Suite's valid-or-not (json-schema-suite.test.ts): what it refuses, with
 * which keyword and pointer; the field, keyword and sentence of each
 * violation, all of them listed; lengths in code points; `$ref` loops.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { type CompiledSchema, compileSchema, SchemaRefusedError } from '../server/users/json-schema/compile-schema.js';

const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

const refusals: Array<{ name: string; schema: unknown; keyword: string; pointer: string }> = [
  { name: 'a negative minLength', schema: { minLength: -1 }, keyword: 'minLength', pointer: '/minLength' },
  { name: 'a fractional maxItems', schema: { maxItems: 1.5 }, keyword: 'maxItems', pointer: '/maxItems' },
  { name: 'a misspelt type', schema: { type: 'strnig' }, keyword: 'type', pointer: '/type' },
  {
    name: 'a type named twice, deep down',
    schema: { properties: { a: { type: ['string', 'string'] } } },
    keyword: 'type',
    pointer: '/properties/a/type',
  },
  { name: 'an empty list of types', schema: { type: [] }, keyword: 'type', pointer: '/type' },
  {
    name: 'a keyword outside the list',
    schema: { minProperties: 1 },
    keyword: 'minProperties',
    pointer: '/minProperties',
  },
  {
    name: 'unevaluatedProperties in a subschema',
    schema: { properties: { a: { unevaluatedProperties: false } } },
    keyword: 'unevaluatedProperties',
    pointer: '/properties/a/unevaluatedProperties',
  },
  { name: 'an $anchor', schema: { $defs: { a: { $anchor: 'a' } } }, keyword: '$anchor', pointer: '/$defs/a/$anchor' },
  { name: 'a format not checked', schema: { format: 'hostname' }, keyword: 'format', pointer: '/format' },
  { name: 'an invalid pattern', schema: { pattern: '(' }, keyword: 'pattern', pointer: '/pattern' },
  {
    name: 'a pattern valid only without the u flag',
    schema: { pattern: '\\-' },
    keyword: 'pattern',
    pointer: '/pattern',
  },
  {
    name: 'an invalid patternProperties pattern',
    schema: { patternProperties: { '[': {} } },
    keyword: 'patternProperties',
    pointer: '/patternProperties/[',
  },
  { name: 'a $ref that resolves to nothing', schema: { $ref: '#/$defs/missing' }, keyword: '$ref', pointer: '/$ref' },
  {
    name: 'a remote $ref',
    schema: { properties: { a: { $ref: 'https://example.com/a.json' } } },
    keyword: '$ref',
    pointer: '/properties/a/$ref',
  },
  { name: 'a $ref to an anchor', schema: { $ref: '#a' }, keyword: '$ref', pointer: '/$ref' },
  { name: 'a $ref that is not a JSON pointer', schema: { $ref: '#/$defs/a~2' }, keyword: '$ref', pointer: '/$ref' },
  {
    name: 'a $ref to a value that is not a schema',
    schema: { enum: [{}], $ref: '#/enum/0' },
    keyword: '$ref',
    pointer: '/$ref',
  },
  { name: 'the $ref cycle {"$ref": "#"}', schema: { $ref: '#' }, keyword: '$ref', pointer: '/$ref' },
  {
    name: 'two $defs that name each other, even unused',
    schema: { $defs: { a: { $ref: '#/$defs/b' }, b: { anyOf: [{ $ref: '#/$defs/a' }] } } },
    keyword: '$ref',
    pointer: '/$defs/a/$ref',
  },
  {
    name: 'an invalid schema in $defs nobody uses',
    schema: { $defs: { unused: { minLength: 'three' } } },
    keyword: 'minLength',
    pointer: '/$defs/unused/minLength',
  },
  {
    name: 'a member name with / and ~, escaped in the pointer',
    schema: { properties: { 'a/b~c': { maxLength: -2 } } },
    keyword: 'maxLength',
    pointer: '/properties/a~1b~0c/maxLength',
  },
  {
    name: 'a subschema that is not a schema',
    schema: { properties: { a: 5 } },
    keyword: 'properties',
    pointer: '/properties/a',
  },
  { name: 'a schema that is not a schema', schema: 'string', keyword: '', pointer: '' },
  { name: 'items as a list (draft 2019)', schema: { items: [{}] }, keyword: 'items', pointer: '/items' },
  { name: 'an empty allOf', schema: { allOf: [] }, keyword: 'allOf', pointer: '/allOf' },
  { name: 'a multipleOf of 0', schema: { multipleOf: 0 }, keyword: 'multipleOf', pointer: '/multipleOf' },
  { name: 'a minimum that is a string', schema: { minimum: '0' }, keyword: 'minimum', pointer: '/minimum' },
  {
    name: 'required naming a member twice',
    schema: { required: ['a', 'a'] },
    keyword: 'required',
    pointer: '/required',
  },
  { name: 'enum that is not an array', schema: { enum: 'a' }, keyword: 'enum', pointer: '/enum' },
  {
    name: 'uniqueItems that is not a boolean',
    schema: { uniqueItems: 1 },
    keyword: 'uniqueItems',
    pointer: '/uniqueItems',
  },
  { name: 'a title that is not a string', schema: { title: 5 }, keyword: 'title', pointer: '/title' },
  {
    name: 'another dialect',
    schema: { $schema: 'http://json-schema.org/draft-07/schema#' },
    keyword: '$schema',
    pointer: '/$schema',
  },
  {
    name: '$schema below the root',
    schema: { properties: { a: { $schema: DIALECT } } },
    keyword: '$schema',
    pointer: '/properties/a/$schema',
  },
  { name: '$id below the root', schema: { $defs: { a: { $id: 'a.json' } } }, keyword: '$id', pointer: '/$defs/a/$id' },
  { name: 'a relative $id at the root', schema: { $id: 'user.json' }, keyword: '$id', pointer: '/$id' },
  {
    name: 'schemas nested past 64 levels',
    schema: Array.from({ length: 70 }).reduce<unknown>((inner) => ({ not: inner }), {}),
    keyword: 'not',
    pointer: '/not'.repeat(65),
  },
];

for (const c of refusals) {
  test(`compileSchema refuses ${c.name}, naming ${c.keyword || 'the schema'} at ${c.pointer || '/'}`, () => {
    assert.throws(
      () => compileSchema(c.schema),
      (error) => {
        assert.ok(error instanceof SchemaRefusedError);
        assert.deepEqual([error.keyword, error.pointer], [c.keyword, c.pointer]);
        assert.ok(error.message.includes(c.pointer || '/'), error.message);
        return true;
      },
    );
  });
}

test('compileSchema takes the annotations, a root $id and $schema, and boolean schemas', () => {
  const schema = {
    $schema: DIALECT,
    $id: 'https://example.com/user.json',
    $comment: 'users of the example',
    title: 'User',
    description: 'A user',
    examples: [{ name: 'Alice' }],
    properties: {
      name: { default: 'nobody', title: 'Name', $ref: 'https://example.com/user.json#/$defs/text' },
      self: { $ref: 'https://example.com/user.json' },
    },
    $defs: { text: { type: 'string' } },
  };
  const compiled = compileSchema(schema);
  assert.deepEqual(compiled.validate({ name: 'Alice', self: { name: 'Bob' } }), []);
  assert.deepEqual(
    compiled.validate({ name: 'Alice', self: { name: 7 } }).map((v) => v.field),
    ['self.name'],
  );
  assert.deepEqual(compileSchema(true).validate({ name: 'a' }), []);
  assert.deepEqual(compileSchema(false).validate({ name: 'a' }), [
    { field: '', keyword: 'false', detail: 'the user is not allowed' },
  ]);
});

const USER_SCHEMA = {
  type: 'object',
  required: ['name', 'email'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 40 },
    email: { type: 'string', format: 'email' },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    role: { enum: ['admin', 'member'] },
    homepage: { type: 'string', format: 'uri' },
    born: { type: 'string', format: 'date' },
    address: {
      type: 'object',
      required: ['city'],
      properties: { city: { type: 'string' }, zip: { type: 'string', pattern: '^[0-9]{4,5}$' } },
    },
    tags: { type: 'array', items: { type: 'string', maxLength: 10 }, uniqueItems: true, maxItems: 3 },
  },
};

test('a valid user has no violations', () => {
  const compiled = compileSchema(USER_SCHEMA);
  const user = {
    name: 'Alice',
    email: 'alice@example.com',
    age: 30.0,
    role: 'admin',
    homepage: 'https://example.com/alice',
    born: '1994-02-28',
    address: { city: 'Oslo', zip: '0150' },
    tags: ['a', 'b'],
  };
  assert.deepEqual(compiled.validate(user), []);
});

test('every violation is listed, each with its field, keyword and a sentence', () => {
  const compiled: CompiledSchema = compileSchema(USER_SCHEMA);
  const user = {
    name: '',
    email: 'alice',
    age: -1,
    role: 'owner',
    homepage: '/alice',
    born: '2021-02-29',
    address: { zip: '12' },
    tags: ['a', 'a', 'far too long a tag', 'd'],
    nickname: 'Al',
  };
  assert.deepEqual(compiled.validate(user), [
    { field: 'name', keyword: 'minLength', detail: 'name must have at least 1 character' },
    { field: 'email', keyword: 'format', detail: 'email must be an email address' },
    { field: 'age', keyword: 'minimum', detail: 'age must be at least 0' },
    { field: 'role', keyword: 'enum', detail: 'role must be one of: admin, member' },
    {
      field: 'homepage',
      keyword: 'format',
      detail: 'homepage must be a URI (RFC 3986, with a scheme, as https://example.com/)',
    },
    { field: 'born', keyword: 'format', detail: 'born must be a date (YYYY-MM-DD)' },
    { field: 'address.city', keyword: 'required', detail: 'address.city is required' },
    { field: 'address.zip', keyword: 'pattern', detail: 'address.zip must match the pattern ^[0-9]{4,5}$' },
    { field: 'tags[2]', keyword: 'maxLength', detail: 'tags[2] must have at most 10 characters' },
    { field: 'tags', keyword: 'maxItems', detail: 'tags must have at most 3 items' },
    {
      field: 'tags',
      keyword: 'uniqueItems',
      detail: 'tags must not hold the same item twice (tags[0] and tags[1] are equal)',
    },
    { field: 'nickname', keyword: 'additionalProperties', detail: 'nickname is not allowed' },
  ]);
  assert.deepEqual(compiled.validate({}), [
    { field: 'name', keyword: 'required', detail: 'name is required' },
    { field: 'email', keyword: 'required', detail: 'email is required' },
  ]);
  assert.deepEqual(compiled.validate([]), [{ field: '', keyword: 'type', detail: 'the user must be an object' }]);
});

const sentences: Array<{
  schema: unknown;
  value: unknown;
  violations: Array<[field: string, keyword: string, detail: string]>;
}> = [
  { schema: { type: ['string', 'null'] }, value: 1, violations: [['', 'type', 'the user must be a string or null']] },
  {
    schema: { properties: { a: { type: ['integer', 'boolean', 'array'] } } },
    value: { a: 1.5 },
    violations: [['a', 'type', 'a must be an integer, true or false or an array']],
  },
  { schema: { properties: { a: { const: 'on' } } }, value: { a: 'off' }, violations: [['a', 'const', 'a must be on']] },
  {
    schema: { properties: { a: { const: { x: [1] } } } },
    value: { a: { x: [2] } },
    violations: [['a', 'const', 'a must be {"x":[1]}']],
  },
  {
    schema: { properties: { a: { enum: ['a b', 1, null, 'x, y'] } } },
    value: { a: 2 },
    violations: [['a', 'enum', 'a must be one of: a b, 1, null, "x, y"']],
  },
  {
    schema: { properties: { n: { exclusiveMinimum: 0, exclusiveMaximum: 10, multipleOf: 0.5 } } },
    value: { n: 10.25 },
    violations: [
      ['n', 'exclusiveMaximum', 'n must be less than 10'],
      ['n', 'multipleOf', 'n must be a multiple of 0.5'],
    ],
  },
  {
    schema: { properties: { n: { exclusiveMinimum: 0, maximum: 1 } } },
    value: { n: 0 },
    violations: [['n', 'exclusiveMinimum', 'n must be greater than 0']],
  },
  {
    schema: { properties: { id: { format: 'uuid' }, at: { format: 'date-time' } } },
    value: { id: 'x', at: '2024-05-01 12:00' },
    violations: [
      ['id', 'format', 'id must be a UUID (as 123e4567-e89b-12d3-a456-426614174000)'],
      ['at', 'format', 'at must be a date and time (RFC 3339, as 2024-05-01T12:00:00Z)'],
    ],
  },
  {
    schema: { properties: { phone: { anyOf: [{ type: 'string', pattern: '^\\+' }, { type: 'null' }] } } },
    value: { phone: '555' },
    violations: [
      ['phone', 'anyOf', 'phone must satisfy one of: phone must match the pattern ^\\+; or phone must be null'],
    ],
  },
  {
    schema: { oneOf: [{ required: ['a'] }, { required: ['b'] }] },
    value: { a: 1, b: 2 },
    violations: [
      ['', 'oneOf', 'the user must satisfy exactly one of the oneOf schemas; it satisfies both schema 1 and schema 2'],
    ],
  },
  {
    schema: { oneOf: [{ required: ['a'] }, { required: ['b'] }] },
    value: {},
    violations: [['', 'oneOf', 'the user must satisfy one of: a is required; or b is required']],
  },
  {
    schema: { properties: { a: { not: { type: 'null' } } } },
    value: { a: null },
    violations: [['a', 'not', 'a must not satisfy the schema under not']],
  },
  {
    schema: { allOf: [{ properties: { a: { type: 'string' } } }, { properties: { a: { minLength: 3 } } }] },
    value: { a: 'x' },
    violations: [['a', 'minLength', 'a must have at least 3 characters']],
  },
  {
    schema: { properties: { list: { prefixItems: [{ type: 'string' }, { type: 'number' }], items: false } } },
    value: { list: [1, 'a', true] },
    violations: [
      ['list[0]', 'type', 'list[0] must be a string'],
      ['list[1]', 'type', 'list[1] must be a number'],
      ['list[2]', 'items', 'list[2] is not allowed'],
    ],
  },
  {
    schema: {
      properties: {
        m: { patternProperties: { '^x-': { type: 'string' } }, additionalProperties: { type: 'integer' } },
      },
    },
    value: { m: { 'x-a': 1, b: 'b', c: 2 } },
    violations: [
      ['m.x-a', 'type', 'm.x-a must be a string'],
      ['m.b', 'type', 'm.b must be an integer'],
    ],
  },
  {
    schema: { properties: { grid: { items: { items: { minimum: 0 } } } } },
    value: { grid: [[0], [1, -1]] },
    violations: [['grid[1][1]', 'minimum', 'grid[1][1] must be at least 0']],
  },
  {
    schema: { properties: { a: { $ref: '#/$defs/short' } }, $defs: { short: { maxLength: 1 } } },
    value: { a: 'ab' },
    violations: [['a', 'maxLength', 'a must have at most 1 character']],
  },
  {
    schema: { properties: { list: { minItems: 1 } } },
    value: { list: [] },
    violations: [['list', 'minItems', 'list must have at least 1 item']],
  },
];

for (const c of sentences) {
  test(`${JSON.stringify(c.schema)} says of ${JSON.stringify(c.value)}: ${c.violations.map((v) => v[2]).join('; ')}`, () => {
    const found = compileSchema(c.schema).validate(c.value);
    assert.deepEqual(
      found.map((v) => [v.field, v.keyword, v.detail]),
      c.violations,
    );
  });
}

test('minLength and maxLength count code points, not UTF-16 units', () => {
  const two = compileSchema({ minLength: 2, maxLength: 2 });
  assert.deepEqual(two.validate('😀😀'), []);
  assert.deepEqual(two.validate('é😀'), []);
  assert.deepEqual(
    two.validate('😀').map((v) => v.keyword),
    ['minLength'],
  );
  assert.deepEqual(
    two.validate('😀😀😀').map((v) => v.keyword),
    ['maxLength'],
  );
  assert.deepEqual(
    two.validate('abc').map((v) => v.keyword),
    ['maxLength'],
  );
});

test('pattern uses Unicode regular expressions: . is one code point', () => {
  const compiled = compileSchema({ pattern: '^.$' });
  assert.deepEqual(compiled.validate('😀'), []);
  assert.equal(compiled.validate('ab').length, 1);
});

test('numbers: 1.0 is an integer, and multipleOf works on decimals', () => {
  assert.deepEqual(compileSchema({ type: 'integer' }).validate(JSON.parse('1.0')), []);
  assert.equal(compileSchema({ type: 'integer' }).validate(1.5).length, 1);
  const tenth = compileSchema({ multipleOf: 0.1 });
  for (const n of [0.3, 0.7, 1e308, -2.5, 0]) assert.deepEqual(tenth.validate(n), [], String(n));
  assert.equal(tenth.validate(0.35).length, 1);
  assert.deepEqual(compileSchema({ multipleOf: 3 }).validate(9), []);
  assert.equal(compileSchema({ multipleOf: 3 }).validate(10).length, 1);
});

test('enum, const and uniqueItems compare as JSON: member order does not count, 1 and 1.0 are one number', () => {
  assert.deepEqual(compileSchema({ enum: [{ a: 1, b: [2] }] }).validate(JSON.parse('{"b":[2.0],"a":1}')), []);
  assert.deepEqual(compileSchema({ const: [1, { x: null }] }).validate([1.0, { x: null }]), []);
  assert.equal(compileSchema({ enum: [1] }).validate(true).length, 1);
  assert.equal(compileSchema({ enum: ['1'] }).validate(1).length, 1);
  const unique = compileSchema({ uniqueItems: true });
  assert.deepEqual(unique.validate([1, '1', true, [1], { a: 1 }, null]), []);
  assert.equal(
    unique.validate([
      { a: 1, b: 2 },
      { b: 2, a: 1 },
    ]).length,
    1,
  );
  // Past 16 items, duplicates are found by a canonical text instead of by pairs.
  const many = Array.from({ length: 40 }, (_, i) => ({ i, tags: [String(i)] }));
  assert.deepEqual(unique.validate([...many, '[1]', [1]]), []);
  assert.deepEqual(unique.validate([...many, { tags: ['7'], i: 7 }]), [
    {
      field: '',
      keyword: 'uniqueItems',
      detail: 'the user must not hold the same item twice ([7] and [40] are equal)',
    },
  ]);
});

test('member names that Object.prototype holds are read as own members only', () => {
  // `__proto__` in an object literal would set the prototype: the schema is parsed, as a schema file is.
  const compiled = compileSchema(
    JSON.parse(
      '{"required":["toString"],"properties":{"constructor":{"type":"string"},"__proto__":{"type":"string"}}}',
    ),
  );
  assert.deepEqual(
    compiled.validate({}).map((v) => v.field),
    ['toString'],
  );
  assert.deepEqual(compiled.validate(JSON.parse('{"toString":1,"__proto__":"x"}')), []);
  assert.deepEqual(
    compiled.validate(JSON.parse('{"toString":1,"__proto__":2}')).map((v) => v.field),
    ['__proto__'],
  );
});

test('a schema that refers to itself through a member ends, one level of the value at a time', () => {
  const compiled = compileSchema({
    $defs: { node: { type: 'object', required: ['name'], properties: { child: { $ref: '#/$defs/node' } } } },
    $ref: '#/$defs/node',
  });
  let user: Record<string, unknown> = { name: 'leaf' };
  for (let i = 0; i < 14; i++) user = { name: `n${i}`, child: user };
  assert.deepEqual(compiled.validate(user), []);
  const broken = { name: 'a', child: { name: 'b', child: { child: { name: 'd' } } } };
  assert.deepEqual(compiled.validate(broken), [
    { field: 'child.child.name', keyword: 'required', detail: 'child.child.name is required' },
  ]);
  const root = compileSchema({ properties: { parent: { $ref: '#' } }, additionalProperties: { type: 'string' } });
  assert.deepEqual(
    root.validate({ parent: { parent: { x: 1 } } }).map((v) => v.field),
    ['parent.parent.x'],
  );
});

test('a $ref is a JSON pointer in a URI fragment: escapes and percent-encoding are decoded', () => {
  const compiled = compileSchema({
    $defs: { 'a/b': { type: 'string' }, 'c~d': { type: 'number' }, 'e%f': { type: 'null' } },
    properties: {
      x: { $ref: '#/$defs/a~1b' },
      y: { $ref: '#/$defs/c~0d' },
      z: { $ref: '#/$defs/e%25f' },
    },
  });
  assert.deepEqual(compiled.validate({ x: 's', y: 1, z: null }), []);
  assert.deepEqual(
    compiled.validate({ x: 1, y: 's', z: 0 }).map((v) => v.field),
    ['x', 'y', 'z'],
  );
});

test('validate answers a fresh list each time, never one shared with an earlier answer', () => {
  const compiled = compileSchema({ required: ['a'] });
  const first = compiled.validate({});
  first.push({ field: 'x', keyword: 'x', detail: 'x' });
  assert.equal(compiled.validate({}).length, 1);
  const empty = compiled.validate({ a: 1 });
  empty.push({ field: 'x', keyword: 'x', detail: 'x' });
  assert.deepEqual(compiled.validate({ a: 1 }), []);
});

test("docs/schema.md's sample: its schema compiles, and its user breaks it as the page's table says", () => {
  const page = readFileSync(new URL('../docs/schema.md', import.meta.url), 'utf8');
  const schema: unknown = JSON.parse(/```json\n([\s\S]*?)```/.exec(page)![1]!);
  const user: unknown = JSON.parse(/A user `(\{.*?\})`/s.exec(page)![1]!.replace(/\n/g, ' '));
  const rows = [...page.matchAll(/^\| `([^`]*)` \| `([^`]*)` \| ([^`|]+) \|$/gm)].map((m) => ({
    field: m[1]!,
    keyword: m[2]!,
    detail: m[3]!,
  }));
  assert.ok(rows.length >= 3, `the table has ${rows.length} rows`);
  assert.deepEqual(compileSchema(schema).validate(user), rows);
});

test('one compiled schema gives each user its own answer, whatever order of members the users before it had', () => {
  const compiled = compileSchema({
    required: ['id', 'name'],
    properties: { id: { type: 'integer' }, name: { type: 'string' } },
    additionalProperties: { type: 'boolean' },
  });
  const users: Array<[user: unknown, fields: string[]]> = [
    [{ id: 1, name: 'a', extra: true }, []],
    [{ name: 'a', id: 1, extra: true }, []],
    [{ extra: 'no', name: 'a', id: 1 }, ['extra']],
    [{ id: 'x', name: 'a' }, ['id']],
    [{ name: 1, extra: true }, ['id', 'name']],
    [{ id: 1, extra: true, name: 'a' }, []],
    [{ id: 1, name: 'a', extra: true, more: 1 }, ['more']],
    [{ id: 1, name: 'a', extra: true }, []],
    [{ id: 1, extra: true }, ['name']],
  ];
  for (let round = 0; round < 3; round++)
    for (const [user, fields] of users)
      assert.deepEqual(
        compiled.validate(user).map((v) => v.field),
        fields,
        JSON.stringify(user),
      );
});

test('readsMember is false only where no value of the member, nor its absence, changes the answer', () => {
  const ignoring = [
    true,
    false,
    { type: 'object', required: ['name'], properties: { name: { type: 'string', maxLength: 3 } } },
    { allOf: [{ properties: { name: { minLength: 2 } } }, { not: { required: ['nick'] } }] },
    { anyOf: [{ $ref: '#/$defs/named' }, { required: ['nick'] }], $defs: { named: { required: ['name'] } } },
    { properties: { self: { $ref: '#' }, other: { properties: { id: { type: 'string' } } } }, required: ['name'] },
    { patternProperties: { '^n': { type: 'string' } }, additionalProperties: true },
  ];
  const reading = [
    { properties: { id: { type: 'integer' } } },
    { required: ['id'] },
    { additionalProperties: false, properties: { name: {} } },
    { patternProperties: { d$: { maximum: 5 } } },
    { enum: [{ name: 'a' }] },
    { const: { name: 'a' } },
    { oneOf: [{ not: { $ref: '#/$defs/withId' } }], $defs: { withId: { required: ['id'] } } },
  ];
  const users = [{}, { name: 'ab' }, { name: 'abcd' }, { nick: 'x' }, { name: 7, self: { id: 'x' }, other: { id: 2 } }];
  for (const schema of ignoring) {
    const compiled = compileSchema(schema);
    assert.equal(compiled.readsMember('id'), false, JSON.stringify(schema));
    for (const user of users)
      for (const id of [1, 9, 'x'])
        assert.deepEqual(compiled.validate({ ...user, id }), compiled.validate(user), JSON.stringify(schema));
  }
  for (const schema of reading) assert.equal(compileSchema(schema).readsMember('id'), true, JSON.stringify(schema));
  // Each of them gives some user a different answer with an id than without one.
  for (const schema of reading) {
    const compiled = compileSchema(schema);
    const differs = [...users, { name: 'a' }].some((user) =>
      [6, 'x'].some((id) => compiled.validate({ ...user, id }).length !== compiled.validate(user).length),
    );
    assert.ok(differs, JSON.stringify(schema));
  }
});
