/**
 * One jest run starts the embedded stack (FerretDB + Temporal dev server) once, on free ports
 * (test/setup/global-setup.ts), and every suite talks to it over real HTTP and gRPC.
 */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
    // The standard OAuth clients the tests drive unmodified are ESM-only: compiled to CommonJS for jest alone.
    '/node_modules/(openid-client|oauth4webapi|dpop|jose)/.+\\.js$': [
      '@swc/jest',
      { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }
    ]
  },
  transformIgnorePatterns: ['/node_modules/(?!(openid-client|oauth4webapi|dpop|jose)/)'],
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
  watchman: false
};
