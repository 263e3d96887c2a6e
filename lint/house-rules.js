// The house's own ESLint rules: a doc comment sits on what it documents, and nothing is exported that no file imports.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** A `/** ... *\/` comment. */
function isDocComment(comment) {
  return comment.type === 'Block' && comment.value.startsWith('*');
}

/**
 * A doc comment is the file's first comment (what the file is for), or
 * sits on the line directly above the code it documents: never above a
 * blank line, another comment or the end of the file, which is what a
 * comment left behind when code moved looks like.
 */
const docCommentPlacement = {
  meta: {
    type: 'suggestion',
    docs: { description: 'a doc comment sits directly above what it documents' },
    schema: [],
    messages: {
      alone:
        'This doc comment documents nothing: {{why}}. Move it onto the line above its declaration, or make it a // comment.',
    },
  },
  create(context) {
    const source = context.sourceCode;
    return {
      Program() {
        for (const comment of source.getAllComments()) {
          if (!isDocComment(comment)) continue;
          if (source.getTokenBefore(comment, { includeComments: true }) === null) continue;
          const next = source.getTokenAfter(comment, { includeComments: true });
          const why =
            next === null
              ? 'the file ends after it'
              : next.loc.start.line === comment.loc.end.line
                ? undefined
                : next.type === 'Block' || next.type === 'Line'
                  ? 'another comment follows it'
                  : next.loc.start.line > comment.loc.end.line + 1
                    ? 'a blank line follows it'
                    : undefined;
          if (why !== undefined) context.report({ loc: comment.loc, messageId: 'alone', data: { why } });
        }
      },
    };
  },
};

/**
 * The folders whose files import one another: every source file of the project, with the files at its root
 * (eslint.config.js).
 */
const SOURCE_FOLDERS = ['server', 'cli', 'shared', 'test', 'bench', 'bin', 'lint', 'console'];

/**
 * A module specifier of `from`, as the file it names (`./x.js` is `./x.ts` in the sources, unless an `x.js` is there),
 * or undefined for a package.
 */
function resolveSpecifier(from, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const path = resolve(dirname(from), specifier);
  return path.endsWith('.js') && !existsSync(path) ? `${path.slice(0, -3)}.ts` : path;
}

/** What `file` takes from other files: for each file it names, the names it imports, or '*' for all of them. */
function importsOf(file, text) {
  const taken = [];
  const take = (specifier, names) => {
    const target = resolveSpecifier(file, specifier);
    if (target !== undefined) taken.push([target, names]);
  };
  const visit = (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      take(node.moduleSpecifier.text, namesOf(node));
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteralLike(argument)) take(argument.text, ['*']);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      take(node.argument.literal.text, node.qualifier ? [node.qualifier.getText()] : ['*']);
    }
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true));
  return taken;
}

/** The names an import or re-export takes from its module. */
function namesOf(node) {
  if (ts.isExportDeclaration(node)) {
    if (!node.exportClause || !ts.isNamedExports(node.exportClause)) return ['*'];
    return node.exportClause.elements.map((e) => (e.propertyName ?? e.name).text);
  }
  const clause = node.importClause;
  if (!clause) return ['*'];
  const names = clause.name ? ['default'] : [];
  if (clause.namedBindings && ts.isNamespaceImport(clause.namedBindings)) return ['*'];
  if (clause.namedBindings) names.push(...clause.namedBindings.elements.map((e) => (e.propertyName ?? e.name).text));
  return names;
}

/** Every .ts, .js and .mjs file under `dir` (only those directly in it, unless `deep`). */
function sourceFiles(dir, deep = true) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return !deep || entry.name === 'fixtures' ? [] : sourceFiles(path);
    return entry.isFile() && /\.(ts|js|mjs)$/.test(entry.name) ? [path] : [];
  });
}

/** For each file of the project under `root`, the names other files take from it; built once per lint run. */
const usesByRoot = new Map();
function usesOf(root) {
  let uses = usesByRoot.get(root);
  if (uses !== undefined) return uses;
  uses = new Map();
  const files = [...sourceFiles(root, false), ...SOURCE_FOLDERS.flatMap((folder) => sourceFiles(join(root, folder)))];
  for (const file of files) {
    for (const [target, names] of importsOf(file, readFileSync(file, 'utf8'))) {
      if (target === file) continue;
      const set = uses.get(target) ?? new Set();
      for (const name of names) set.add(name);
      uses.set(target, set);
    }
  }
  usesByRoot.set(root, uses);
  return uses;
}

/**
 * The files whose exports are for others than the project's own files: the programs' entry modules, and the config
 * files tools load (eslint.config.js).
 */
const ENTRY = /^(server\/main|cli\/main|console\/main)\.ts$|^(bin|bench)\/|\.test\.ts$|^[^/]+\.config\.(js|mjs)$/;

/**
 * An export that no other file imports: either it is used only in its own
 * file (then it need not be exported) or not at all. The entry modules and
 * test files are not checked.
 */
const noUnusedExport = {
  meta: {
    type: 'suggestion',
    docs: { description: 'every export is imported by another file' },
    schema: [],
    messages: { unused: "'{{name}}' is exported but no other file imports it: remove the export, or the code." },
  },
  create(context) {
    const root = context.cwd;
    const file = context.filename;
    if (ENTRY.test(relative(root, file).split('\\').join('/'))) return {};
    const taken = usesOf(root).get(file) ?? new Set();
    if (taken.has('*')) return {};
    const check = (name, node) => {
      if (!taken.has(name)) context.report({ node, messageId: 'unused', data: { name } });
    };
    return {
      ExportNamedDeclaration(node) {
        if (node.source) return;
        const declaration = node.declaration;
        if (declaration?.type === 'VariableDeclaration') {
          for (const d of declaration.declarations) if (d.id.type === 'Identifier') check(d.id.name, d.id);
        } else if (declaration?.id) {
          check(declaration.id.name, declaration.id);
        }
        for (const specifier of node.specifiers) check(specifier.exported.name ?? specifier.exported.value, specifier);
      },
      ExportDefaultDeclaration(node) {
        check('default', node);
      },
    };
  },
};

export default {
  rules: { 'doc-comment-placement': docCommentPlacement, 'no-unused-export': noUnusedExport },
};
