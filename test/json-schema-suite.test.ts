/**
 * The official JSON Schema Test Suite (draft 2020-12), the files of the
 * keywords users-server supports (test/fixtures/json-schema-test-suite):
 * every case passes, except the groups and cases listed below, each with its
 * reason; a listed group must still be refused and a listed case must still
 * disagree with the suite, so the list cannot go stale.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { compileSchema, SchemaRefusedError } from '../server/users/json-schema/compile-schema.js';

const SUITE = join(import.meta.dirname, 'fixtures', 'json-schema-test-suite');

interface Group {
  description: string;
  schema: unknown;
  tests: Array<{ description: string; data: unknown; valid: boolean }>;
}

const UNKNOWN_FORMAT = 'a format outside email, uri, date-time, date and uuid: the schema is refused';
const REMOTE = 'a remote $ref (another document): the schema is refused';
const NESTED_ID = 'an $id below the root (only the root may name the schema): the schema is refused';
const OUTSIDE = (keyword: string) => `${keyword} is outside the supported keywords: the schema is refused`;

/** Groups whose schema compileSchema refuses, by "file | group": the keyword it names and why. */
const REFUSED_GROUPS: Record<string, [keyword: string, reason: string]> = {
  'additionalProperties.json | additionalProperties with propertyNames': ['propertyNames', OUTSIDE('propertyNames')],
  'additionalProperties.json | dependentSchemas with additionalProperties': [
    'dependentSchemas',
    OUTSIDE('dependentSchemas'),
  ],
  'defs.json | validate definition against metaschema': ['$ref', REMOTE],
  'format.json | idn-email format': ['format', UNKNOWN_FORMAT],
  'format.json | regex format': ['format', UNKNOWN_FORMAT],
  'format.json | ipv4 format': ['format', UNKNOWN_FORMAT],
  'format.json | ipv6 format': ['format', UNKNOWN_FORMAT],
  'format.json | idn-hostname format': ['format', UNKNOWN_FORMAT],
  'format.json | hostname format': ['format', UNKNOWN_FORMAT],
  'format.json | time format': ['format', UNKNOWN_FORMAT],
  'format.json | json-pointer format': ['format', UNKNOWN_FORMAT],
  'format.json | relative-json-pointer format': ['format', UNKNOWN_FORMAT],
  'format.json | iri format': ['format', UNKNOWN_FORMAT],
  'format.json | iri-reference format': ['format', UNKNOWN_FORMAT],
  'format.json | uri-reference format': ['format', UNKNOWN_FORMAT],
  'format.json | uri-template format': ['format', UNKNOWN_FORMAT],
  'format.json | duration format': ['format', UNKNOWN_FORMAT],
  "not.json | collect annotations inside a 'not', even if collection is disabled": [
    'unevaluatedProperties',
    OUTSIDE('unevaluatedProperties'),
  ],
  'ref.json | remote ref, containing refs itself': ['$ref', REMOTE],
  'ref.json | Recursive references between schemas': ['$ref', 'a $ref ("node") to another document, by a nested $id'],
  'ref.json | ref creates new scope when adjacent to keywords': [
    'unevaluatedProperties',
    OUTSIDE('unevaluatedProperties'),
  ],
  'ref.json | refs with relative uris and defs': ['$id', NESTED_ID],
  'ref.json | relative refs with absolute uris and defs': ['$id', NESTED_ID],
  'ref.json | $id must be resolved against nearest parent, not just immediate parent': ['$ref', REMOTE],
  'ref.json | order of evaluation: $id and $ref': ['$id', NESTED_ID],
  'ref.json | order of evaluation: $id and $anchor and $ref': ['$anchor', OUTSIDE('$anchor')],
  'ref.json | order of evaluation: $id and $ref on nested schema': ['$id', NESTED_ID],
  'ref.json | URN base URI with URN and anchor ref': ['$ref', 'a $ref to an $anchor, outside the supported keywords'],
  'ref.json | URN ref with nested pointer ref': ['$id', NESTED_ID],
  'ref.json | ref to if': ['if', OUTSIDE('if')],
  'ref.json | ref to then': ['then', OUTSIDE('then')],
  'ref.json | ref to else': ['else', OUTSIDE('else')],
  'ref.json | ref with absolute-path-reference': ['$id', NESTED_ID],
};

const ASSERTED = 'users-server asserts this format, where the draft makes format an annotation by default';

/** Cases whose answer differs from the suite's, by "file | group | case", with the reason. */
const DIFFERENT_CASES: Record<string, string> = {
  'format.json | email format | invalid email string is only an annotation by default': ASSERTED,
  'format.json | uri format | invalid uri string is only an annotation by default': ASSERTED,
  'format.json | date-time format | invalid date-time string is only an annotation by default': ASSERTED,
  'format.json | date format | invalid date string is only an annotation by default': ASSERTED,
  'format.json | uuid format | invalid uuid string is only an annotation by default': ASSERTED,
};

function suiteFiles(dir: string, prefix = ''): string[] {
  return readdirSync(join(SUITE, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? suiteFiles(join(dir, entry.name), `${prefix}${entry.name}/`)
      : entry.name.endsWith('.json')
        ? [`${prefix}${entry.name}`]
        : [],
  );
}

const files = suiteFiles('');
const seenGroups = new Set<string>();
const seenCases = new Set<string>();

for (const file of files) {
  const groups = JSON.parse(readFileSync(join(SUITE, file), 'utf8')) as Group[];
  test(file, async (t) => {
    for (const group of groups) {
      const groupKey = `${file} | ${group.description}`;
      const refused = REFUSED_GROUPS[groupKey];
      if (refused !== undefined) {
        seenGroups.add(groupKey);
        await t.test(`${group.description}: refused (${refused[1]})`, () => {
          assert.throws(
            () => compileSchema(group.schema),
            (error) => error instanceof SchemaRefusedError && error.keyword === refused[0],
          );
        });
        continue;
      }
      await t.test(group.description, async (g) => {
        const compiled = compileSchema(group.schema);
        for (const item of group.tests) {
          const caseKey = `${groupKey} | ${item.description}`;
          const violations = compiled.validate(item.data);
          const reason = DIFFERENT_CASES[caseKey];
          await g.test(item.description, () => {
            if (reason === undefined) {
              assert.equal(violations.length === 0, item.valid, JSON.stringify(violations));
            } else {
              seenCases.add(caseKey);
              assert.notEqual(violations.length === 0, item.valid, `listed: ${reason}`);
            }
          });
        }
      });
    }
  });
}

test('every listed group and case is in the suite', () => {
  assert.deepEqual(
    Object.keys(REFUSED_GROUPS).filter((key) => !seenGroups.has(key)),
    [],
  );
  assert.deepEqual(
    Object.keys(DIFFERENT_CASES).filter((key) => !seenCases.has(key)),
    [],
  );
});
