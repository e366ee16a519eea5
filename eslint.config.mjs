// ESLint: a small rule set, each rule kept for a reason. Layer rules (which folder may import
// which) are checked by infra/scripts/layer-imports.mjs; formatting is Prettier's job.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '**/*.d.ts', 'trainer/.venv/**', '.hat/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    ignores: ['test/**', '**/*.test.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `arr[i] as T` and other casts that change nothing hide the places where a value may really
      // be undefined; without noUncheckedIndexedAccess they are noise (type-aware).
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      // A dropped promise loses its error: every async call is awaited, returned or voided (type-aware).
      '@typescript-eslint/no-floating-promises': 'error',
      // Unused code misleads readers; `_name` marks a parameter kept for a signature.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // `==` coerces; we compare exactly (`== null` is the one idiom kept).
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      // Stage and model configs are parsed by zod; `any` would bypass that.
      '@typescript-eslint/no-explicit-any': 'error',
      // Object names and keys are validated against control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  {
    // Tests: the same rules without type information (half the lint time); they read untyped JSON
    // from servers and fixtures, so `any` is allowed there.
    files: ['test/**/*.ts', '**/*.test.ts', 'shared/**/testing/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      '@typescript-eslint/no-explicit-any': 'off',
      'no-control-regex': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        console: 'readonly',
        __dirname: 'readonly',
        URL: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
