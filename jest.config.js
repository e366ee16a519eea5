/**
 * Two projects: `unit` (tests beside the code, `*.test.ts` under cli/ queues/ workers/ shared/ serve/:
 * no Redis, no S3 server, `make test-unit`) and `integration` (`test/`, `*.int.test.ts` and the
 * other tests there: real Redis, a real local S3-compatible server, real HTTP model servers).
 * `make test` runs both.
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
module.exports = {
  // A global option: Jest ignores it inside a project.
  testTimeout: 60000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      roots: ['<rootDir>/cli', '<rootDir>/queues', '<rootDir>/workers', '<rootDir>/shared', '<rootDir>/serve'],
      testPathIgnorePatterns: ['/node_modules/', '\\.int\\.test\\.ts$'],
    },
    { ...common, displayName: 'integration', roots: ['<rootDir>/test'] },
  ],
};
