// ESLint for the agent, its charts, its build scripts, its benchmarks and its tests (`npm run lint`, which then runs
// scripts/check-cycles.mjs for import circles). typescript-eslint's type-aware rules read the program of
// tsconfig.eslint.json: the typechecked files plus the build's JavaScript, whose types are inferred.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'build/', 'node_modules/', 'test-output/', '**/*.d.ts', '**/*.d.mts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: './tsconfig.eslint.json', tsconfigRootDir: import.meta.dirname },
      globals: globals.node,
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits loses its rejection: every fire-and-forget is a `void` with its reason beside it.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `return promise` inside try skips its catch and finally; elsewhere a bare return is fine.
      '@typescript-eslint/return-await': ['error', 'in-try-catch'],
      // A rejection may pass on what a catch caught (`unknown`) as it was, which is what the chart's error events take.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      // A leading `_` marks a parameter kept for its position, or a property left out of a rest copy.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      // `catch {}` is how this code says that a missing file or a failed cleanup changes nothing.
      'no-empty': ['error', { allowEmptyCatch: true }],
      // Off: the sanitizers and validators match control characters on purpose.
      'no-control-regex': 'off',
      // Off: an `async` function without `await` keeps a promise-returning interface (backends, stores, actors).
      '@typescript-eslint/require-await': 'off',
      // Off: the objects whose methods are passed around are closures (createLogger, headStart, the io objects), not classes.
      '@typescript-eslint/unbound-method': 'off',
      // Off: a `!` or `as` that changes nothing is noise, not a bug (340 today, mostly tests' `!` after a lookup).
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // Off: `'ms' | 'MiB' | string` names the usual values of an open set on purpose.
      '@typescript-eslint/no-redundant-type-constituents': 'off',
    },
  },
  {
    // The fake fabric builds and edits IMDS documents of any shape (tests serve malformed ones), and tests read JSON.
    files: ['src/fabric/**', 'test/**'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // A function longer than a screen does more than one thing: the agent and its charts keep each one under 60 lines.
    files: ['src/**', 'machines/**'],
    rules: { 'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }] },
  },
  {
    // src/os changes the system and src/azure talks to the fabric: the shapes both use are in src/core.
    files: ['src/os/**'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['../azure/*', '../../azure/*'], message: 'src/os does not import src/azure: shared shapes belong in src/core/.' }] }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
