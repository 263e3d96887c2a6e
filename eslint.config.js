// ESLint for the whole tree: typescript-eslint's recommended rules and the house's own (lint/house-rules.js).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import house from './lint/house-rules.js';

/** What the programs, benches and tests find in Node's global scope (TypeScript checks the .ts files itself). */
const NODE_GLOBALS = Object.fromEntries(
  [
    'process',
    'console',
    'URL',
    'Buffer',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'setImmediate',
    'performance',
    'fetch',
  ].map((name) => [name, 'readonly']),
);

/** What the console (console/, run in the browser) finds in the page's global scope. */
const BROWSER_GLOBALS = Object.fromEntries(
  [
    'window',
    'document',
    'location',
    'history',
    'navigator',
    'crypto',
    'fetch',
    'console',
    'URL',
    'URLSearchParams',
    'Headers',
    'EventSource',
    'MessageEvent',
    'Event',
    'KeyboardEvent',
    'IntersectionObserver',
    'TextEncoder',
    'Node',
    'HTMLElement',
    'HTMLAnchorElement',
    'HTMLInputElement',
    'HTMLTableRowElement',
    'HTMLDialogElement',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'btoa',
    'performance',
  ].map((name) => [name, 'readonly']),
);

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/', 'test/fixtures/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: NODE_GLOBALS },
    plugins: { house },
    rules: {
      'house/doc-comment-placement': 'error',
      'house/no-unused-export': 'error',
      // Prettier wraps code at 120 columns but not comments: this holds them to the same width.
      'max-len': [
        'error',
        { code: 120, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreUrls: true, ignoreRegExpLiterals: true },
      ],
      // A name that starts with _ is left unused on purpose (a tuple's or a destructured object's part that is not
      // needed).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // The parsers check for control characters on purpose: they are what the grammars (RFC 6265, RFC 8259) forbid.
      'no-control-regex': 'off',
    },
  },
  { files: ['console/**/*.ts'], languageOptions: { globals: BROWSER_GLOBALS } },
  {
    // bench/ may use the tests' helpers, never the other way: the tests run without the benchmarks.
    files: ['test/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/bench/*'], message: 'test/ imports nothing from bench/: move what both need to test/.' },
          ],
        },
      ],
    },
  },
);
