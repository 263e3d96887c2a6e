/**
 * The zero-dependency rule: the server and shared/ run on Node alone. Every
 * module specifier under server/ and shared/ is `node:`-prefixed or relative;
 * shared/ never reaches into server/ or cli/; inside server/ imports point
 * down the layers of docs/architecture.md, never up; package.json's
 * dependencies are exactly the CLI's three. Specifiers are found with the TypeScript parser, so
 * comments and strings cannot hide or fake an import. The checker itself is
 * tested on samples first, so a violation is known to fail the test.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_EXTENSIONS = /\.(?:[cm]?ts|[cm]?js)$/;

interface Specifier {
  /** The module specifier, or undefined when it is not a string literal (e.g. `import(name)`). */
  text: string | undefined;
  kind: string;
  line: number;
}

/**
 * Every module specifier a source file names: static and type imports, re-exports, import(), require(), import =
 * require().
 */
function findSpecifiers(source: string, fileName = 'sample.ts'): Specifier[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: Specifier[] = [];
  const add = (node: ts.Node, kind: string, expression: ts.Node | undefined) => {
    const text = expression !== undefined && ts.isStringLiteralLike(expression) ? expression.text : undefined;
    found.push({ text, kind, line: file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node, 'import', node.moduleSpecifier);
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined)
      add(node, 'export-from', node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
      add(node, 'import-require', node.moduleReference.expression);
    else if (ts.isImportTypeNode(node)) {
      const arg = node.argument;
      add(node, 'import-type', ts.isLiteralTypeNode(arg) ? arg.literal : undefined);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword) add(node, 'dynamic-import', node.arguments[0]);
      else if (ts.isIdentifier(callee) && callee.text === 'require') add(node, 'require', node.arguments[0]);
      else if (
        ts.isPropertyAccessExpression(callee) &&
        ts.isIdentifier(callee.expression) &&
        callee.expression.text === 'require' &&
        callee.name.text === 'resolve'
      ) {
        add(node, 'require.resolve', node.arguments[0]);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** The zero-dependency rule for one specifier: a `node:` builtin or a relative path. */
function isAllowedSpecifier(specifier: string | undefined): boolean {
  return (
    specifier !== undefined &&
    (specifier.startsWith('node:') || specifier.startsWith('./') || specifier.startsWith('../'))
  );
}

/** Human-readable violations of the zero-dependency rule in one source text. */
function zeroDepViolations(source: string, fileName = 'sample.ts'): string[] {
  return findSpecifiers(source, fileName)
    .filter((s) => !isAllowedSpecifier(s.text))
    .map((s) => `${fileName}:${s.line}: ${s.kind} ${s.text === undefined ? '(not a string literal)' : `'${s.text}'`}`);
}

/** Relative specifiers of a file under shared/ that resolve into server/ or cli/. */
function sharedLayerViolations(source: string, absolutePath: string, root = ROOT): string[] {
  const forbidden = ['server', 'cli'].map((d) => resolve(root, d));
  const out: string[] = [];
  for (const s of findSpecifiers(source, absolutePath)) {
    if (s.text === undefined || !(s.text.startsWith('./') || s.text.startsWith('../'))) continue;
    const target = resolve(dirname(absolutePath), s.text);
    if (forbidden.some((d) => target === d || target.startsWith(d + sep))) {
      out.push(`${relative(root, absolutePath)}:${s.line}: ${s.kind} '${s.text}' reaches ${relative(root, target)}`);
    }
  }
  return out;
}

/**
 * The layers of the house (docs/architecture.md), bottom up. A file may
 * import from its own layer and the layers below it, never from one above.
 * cli/ is a house of its own on shared/.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['shared'],
  ['server/errors.ts'],
  ['server/users'],
  ['server/ops'],
  ['server/store'],
  ['server/security'],
  ['server/http'],
  ['server/commands'],
  ['server/main.ts'],
];

/** The layer of a repository path (index into LAYERS), or -1 outside the server's layers. */
function layerOf(path: string): number {
  return LAYERS.findIndex((layer) => layer.some((prefix) => path === prefix || path.startsWith(prefix + '/')));
}

/** Relative imports of a server/ or shared/ file that run up to a higher layer. */
function layerViolations(source: string, absolutePath: string, root = ROOT): string[] {
  const from = relative(root, absolutePath).split(sep).join('/');
  const own = layerOf(from);
  const out: string[] = [];
  for (const s of findSpecifiers(source, absolutePath)) {
    if (s.text === undefined || !(s.text.startsWith('./') || s.text.startsWith('../'))) continue;
    const to = relative(root, resolve(dirname(absolutePath), s.text))
      .split(sep)
      .join('/')
      .replace(/\.js$/, '.ts');
    const target = layerOf(to);
    if (target > own || (target === -1 && own !== -1))
      out.push(`${from}:${s.line}: imports ${to}, which is ${target === -1 ? 'outside the layers' : 'a layer up'}`);
  }
  return out;
}

/**
 * The one allowed exception: server/store/postgres/driver.ts names `postgres`, the optional PostgreSQL driver, in a
 * dynamic import and its types.
 */
const DRIVER_FILE = 'server/store/postgres/driver.ts';

function isTheDriverImport(violation: string): boolean {
  return violation.startsWith(DRIVER_FILE + ':') && /(?:dynamic-import|import) 'postgres'$/.test(violation);
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.isFile() && SOURCE_EXTENSIONS.test(entry.name)) out.push(path);
  }
  return out.sort();
}

// ------------------------------------------------------------ the checker itself

const mustFlag: { name: string; source: string }[] = [
  { name: 'a default import of a package', source: `import x from 'express';` },
  { name: 'a named import of a package, double-quoted', source: `import { a, b } from "lodash";` },
  { name: 'a multi-line named import', source: `import {\n  a,\n  b,\n} from\n  'left-pad';` },
  { name: 'a namespace import', source: `import * as u from 'undici';` },
  { name: 'a type-only import', source: `import type { Cookie } from 'tough-cookie';` },
  { name: 'a side-effect import', source: `import 'dotenv/config';` },
  { name: 'an export-all from a package', source: `export * from 'pkg';` },
  { name: 'a named export-from a package subpath', source: `export { y } from 'pkg/sub';` },
  { name: 'a scoped package', source: `import { z } from '@scope/pkg';` },
  { name: 'a builtin without the node: prefix', source: `import { readFileSync } from 'fs';` },
  { name: 'an absolute path', source: `import x from '/usr/lib/x.js';` },
  { name: 'a relative-looking specifier without ./', source: `import x from 'server/config.js';` },
  { name: 'a dynamic import of a package', source: `const m = await import('undici');` },
  { name: 'a dynamic import of a computed name', source: `const name = 'x'; const m = await import(name);` },
  { name: 'a require of a package', source: `const c = require('commander');` },
  { name: 'a require of a computed name', source: `const c = require(process.env.MOD!);` },
  { name: 'a require.resolve of a package', source: `const p = require.resolve('commander');` },
  { name: 'an import = require', source: `import fs = require('fs');` },
  { name: 'an import type expression', source: `type T = import('tough-cookie').Cookie;` },
  {
    name: 'a package import hidden after allowed ones',
    source: `import a from 'node:fs';\nimport b from './b.js';\nimport c from 'express';`,
  },
];
for (const c of mustFlag) {
  test(`zero-dependency checker: ${c.name} is flagged`, () => {
    assert.equal(zeroDepViolations(c.source).length, 1, `not flagged: ${c.source}`);
  });
}

const mustPass: { name: string; source: string }[] = [
  { name: 'a relative import', source: `import { x } from './a.js';` },
  { name: 'a parent-relative type import', source: `import type { Y } from '../shared/b.js';` },
  { name: 'a node: builtin with a subpath', source: `import { readFile } from 'node:fs/promises';` },
  { name: 'a dynamic import of a node: builtin', source: `const os = await import('node:os');` },
  { name: 'a relative re-export', source: `export { a } from './a.js'; export * from '../b.js';` },
  {
    name: 'an import only in a comment',
    source: `// import x from 'express';\n/* require('commander') */\nexport const a = 1;`,
  },
  {
    name: 'an import only in a string',
    source: `const s = "import x from 'express'"; const t = \`require('undici')\`;`,
  },
  { name: 'import.meta', source: `const u = new URL('../package.json', import.meta.url);` },
  {
    name: 'a method named require on an object',
    source: `const o = { require: (s: string) => s }; o.require('express');`,
  },
];
for (const c of mustPass) {
  test(`zero-dependency checker: ${c.name} is allowed`, () => {
    assert.deepEqual(zeroDepViolations(c.source), []);
  });
}

test('layer checker: a shared/ file importing from server/ or cli/ is flagged, one importing shared/ is not', () => {
  const file = join(ROOT, 'shared', 'sample.ts');
  assert.equal(sharedLayerViolations(`import { x } from '../server/ops/config.js';`, file).length, 1);
  assert.equal(sharedLayerViolations(`export * from '../cli/main.js';`, file).length, 1);
  assert.equal(sharedLayerViolations(`const m = await import('../server/http/app.js');`, file).length, 1);
  assert.equal(
    sharedLayerViolations(`import { y } from './paths.js'; import { z } from '../shared/problems.js';`, file).length,
    0,
  );
  // A sibling whose name merely starts with "server" is not server/.
  assert.equal(sharedLayerViolations(`import { w } from '../server-notes/x.js';`, file).length, 0);
});

// ------------------------------------------------------------ the repository

test('zero dependencies: every module specifier under server/ and shared/ is node:-prefixed or relative', () => {
  const files = [...sourceFiles(join(ROOT, 'server')), ...sourceFiles(join(ROOT, 'shared'))];
  const names = files.map((f) => relative(ROOT, f).split(sep).join('/'));
  // Guard against a walk that finds nothing and so passes vacuously.
  assert.ok(
    names.includes('server/main.ts') && names.includes('server/http/server.ts') && names.includes('shared/problems.ts'),
    `walk found: ${names.join(', ')}`,
  );
  let specifiers = 0;
  const violations: string[] = [];
  for (const file of files) {
    const source = readFileSync(file, 'utf8');
    specifiers += findSpecifiers(source, file).length;
    violations.push(...zeroDepViolations(source, relative(ROOT, file)).filter((v) => !isTheDriverImport(v)));
  }
  assert.ok(
    specifiers > files.length,
    `only ${specifiers} specifiers in ${files.length} files: the parser is not seeing imports`,
  );
  assert.deepEqual(violations, []);
});

test('layer checker: an import of a higher layer is flagged, one of the same or a lower layer is not', () => {
  const store = join(ROOT, 'server', 'store', 'sample.ts');
  assert.equal(layerViolations(`import { x } from '../http/app.js';`, store).length, 1, 'store -> http runs up');
  assert.equal(
    layerViolations(`import { x } from '../commands/serve.js';`, store).length,
    1,
    'store -> commands runs up',
  );
  assert.equal(
    layerViolations(
      `import { x } from './memory/state.js'; import { y } from '../ops/histogram.js'; import { z } from '../users/rules.js'; import { e } from '../errors.js';`,
      store,
    ).length,
    0,
  );
  assert.equal(
    layerViolations(`import { x } from '../../cli/main.js';`, store).length,
    1,
    'server -> cli is outside the layers',
  );
  const users = join(ROOT, 'server', 'users', 'sample.ts');
  assert.equal(
    layerViolations(`import type { Store } from '../store/store.js';`, users).length,
    1,
    'a type import counts too',
  );
});

test('layers: every import under server/ and shared/ points to its own layer or one below (docs/architecture.md)', () => {
  const files = [...sourceFiles(join(ROOT, 'server')), ...sourceFiles(join(ROOT, 'shared'))];
  const unplaced = files.map((f) => relative(ROOT, f).split(sep).join('/')).filter((path) => layerOf(path) === -1);
  assert.deepEqual(unplaced, [], 'every file belongs to a layer');
  assert.deepEqual(
    files.flatMap((f) => layerViolations(readFileSync(f, 'utf8'), f)),
    [],
  );
});

test('layers: nothing in shared/ imports from server/ or cli/', () => {
  const files = sourceFiles(join(ROOT, 'shared'));
  assert.ok(files.length > 0, 'shared/ has no source files');
  const violations = files.flatMap((f) => sharedLayerViolations(readFileSync(f, 'utf8'), f));
  assert.deepEqual(violations, []);
});

test('the console (console/, run in the browser) imports only its own files and shared/: no package, no node: module, nothing of server/ or cli/', () => {
  const files = sourceFiles(join(ROOT, 'console'));
  assert.ok(files.length > 0, 'console/ has no source files');
  const allowed = [resolve(ROOT, 'console'), resolve(ROOT, 'shared')];
  const violations = files.flatMap((file) =>
    findSpecifiers(readFileSync(file, 'utf8'), file)
      .filter((s) => {
        if (s.text === undefined || !(s.text.startsWith('./') || s.text.startsWith('../'))) return true;
        const target = resolve(dirname(file), s.text);
        return !allowed.some((dir) => target.startsWith(dir + sep));
      })
      .map((s) => `${relative(ROOT, file)}:${s.line}: ${s.kind} '${s.text}'`),
  );
  assert.deepEqual(violations, []);
});

test("package.json: the runtime dependencies are exactly commander, undici and tough-cookie (the CLI's); postgres is an optional peer, never installed for users of the journal", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown>;
  assert.deepEqual(Object.keys((pkg.dependencies ?? {}) as object).sort(), ['commander', 'tough-cookie', 'undici']);
  assert.deepEqual(pkg.peerDependencies, { postgres: '^3.4.0' });
  assert.deepEqual(pkg.peerDependenciesMeta, { postgres: { optional: true } });
  for (const field of ['optionalDependencies', 'bundleDependencies', 'bundledDependencies']) {
    assert.equal(pkg[field], undefined, `package.json has ${field}`);
  }
});

test('zero dependencies: only the driver module names postgres, and only in a dynamic import and type imports', () => {
  const source = readFileSync(join(ROOT, DRIVER_FILE), 'utf8');
  const named = findSpecifiers(source, DRIVER_FILE).filter((s) => s.text === 'postgres');
  assert.ok(
    named.some((s) => s.kind === 'dynamic-import'),
    'the driver is loaded with import()',
  );
  assert.ok(/^\s*import type /m.test(source), 'its static import is a type import');
  for (const line of source.split('\n').filter((l) => /^import .*'postgres'/.test(l)))
    assert.match(line, /^import type /, line);
});
