/**
 * Three projects:
 * - `unit`: the tests beside the code, `*.test.ts` under cli/ queues/ workers/ shared/ serve/: no
 *   Redis, no S3 server, no trainer. `make test-unit`, the fast loop, runs this project only.
 * - `golden`: the reference comparisons beside the code, `*.golden.test.ts`: renderings,
 *   encodings, masks and fingerprints of every registry tokenizer and shipped chat template
 *   against recorded golden files (shared/text/__golden__/), against Hugging Face's own jinja and
 *   tokenizers, and against Python Jinja (recorded, and live with the trainer's Python). They load
 *   every large tokenizer, so the fast loop leaves them out.
 * - `integration`: `test/`, `*.int.test.ts` and the other tests there: real Redis, a real local
 *   S3-compatible server, real HTTP model servers.
 * `make test` (what CI runs) runs all three.
 */
const esmPackages = ['hyparquet', 'hyparquet-writer', 'commander'].join('|');
const common = {
  // Node environment sharing the host's typed arrays, so onnxruntime-node outputs pass instanceof checks.
  testEnvironment: '<rootDir>/shared/models/onnx/onnx-jest-environment.js',
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.(t|j|mj)sx?$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmPackages})/)`],
  // Builds dist/ when stale: CLI tests spawn the compiled CLI, sandboxed processors load compiled files.
  globalSetup: '<rootDir>/test/global-setup.ts',
  // Start-up registrations every hat process makes (model adapters).
  setupFiles: ['<rootDir>/test/setup-start-up.ts'],
};
const unitRoots = ['<rootDir>/cli', '<rootDir>/queues', '<rootDir>/workers', '<rootDir>/shared', '<rootDir>/serve'];
module.exports = {
  // A global option: Jest ignores it inside a project.
  testTimeout: 60000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      roots: unitRoots,
      testPathIgnorePatterns: ['/node_modules/', '\\.int\\.test\\.ts$', '\\.golden\\.test\\.ts$'],
    },
    { ...common, displayName: 'golden', roots: unitRoots, testMatch: ['**/*.golden.test.ts'] },
    { ...common, displayName: 'integration', roots: ['<rootDir>/test'] },
  ],
};
