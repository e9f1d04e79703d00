// Mutation testing (StrykerJS) for one module at a time, with the tests that cover it:
//   npm run test:mutation -- --mutate server/auth/tokens.ts --testFiles test/auth-tokens.test.ts
// test/mutation.ts fills in `mutate` and the mocha command; this file holds the rest. Not part of CI (see README).
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  // test/mutation.ts chooses the runner: mocha in one process per worker with per-test coverage (the default), or the
  // command runner (a fresh mocha process per mutant). The mocha runner's Node 20 line (9.x) needs mocha below 12.
  plugins: ['@stryker-mutator/mocha-runner'],
  testRunner: 'mocha',
  coverageAnalysis: 'perTest',
  // Nothing is mutated unless asked: pass --mutate with the module under test.
  mutate: [],
  // Two cores shared with others: one test process at a time (--concurrency 2 at most).
  concurrency: 1,
  // Each run starts a test server; a mutant that hangs a request is a timeout (counted as detected), not a stall.
  timeoutMS: 30000,
  timeoutFactor: 1.5,
  dryRunTimeoutMinutes: 10,
  // Mutants are written into a copy of the project (.stryker-tmp/), never into the working tree.
  inPlace: false,
  ignorePatterns: ['data', 'dist', 'coverage', 'reports', 'test/load/reports', '.stryker-tmp', '*.log'],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 75 },
  cleanTempDir: 'always',
  tempDirName: '.stryker-tmp',
};
