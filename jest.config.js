/** Unit tests live beside the code (`*.test.ts`), integration tests under `test/` (`*.int.test.ts`). */
const esmPackages = ['hyparquet', 'hyparquet-writer'].join('|');
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/cli', '<rootDir>/queues', '<rootDir>/workers', '<rootDir>/shared', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.(t|j|mj)sx?$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmPackages})/)`],
  testTimeout: 60000,
};
