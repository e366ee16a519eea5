/** Unit tests live beside the code (`*.test.ts`), integration tests under `test/` (`*.int.test.ts`). */
const esmPackages = ['hyparquet', 'hyparquet-writer', 'commander'].join('|');
module.exports = {
  // Node environment sharing the host's typed arrays, so onnxruntime-node outputs pass instanceof checks.
  testEnvironment: '<rootDir>/shared/models/onnx/onnx-jest-environment.js',
  roots: ['<rootDir>/cli', '<rootDir>/queues', '<rootDir>/workers', '<rootDir>/shared', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.(t|j|mj)sx?$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmPackages})/)`],
  testTimeout: 60000,
  // Builds dist/ when stale: CLI tests spawn the compiled CLI, sandboxed processors load compiled files.
  globalSetup: '<rootDir>/test/global-setup.ts',
  // Start-up registrations every hat process makes (model adapters).
  setupFiles: ['<rootDir>/test/setup-start-up.ts'],
};
