// Mutation testing (StrykerJS) for one module at a time, with the tests that cover it:
//   npm run test:mutation -- --mutate server/auth/tokens.ts --testFiles test/auth-tokens.test.ts
// test/mutation.ts fills in `mutate` and the mocha command; this file holds the rest. Not part of CI (see README).
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  // The command runner: each mutant runs mocha on the chosen test files in a fresh process (tsx and the root hooks
  // come from .mocharc.json). The mocha runner plugin does not fit here: its Node 20 line (9.x) cannot load mocha 12.
  testRunner: 'command',
  commandRunner: { command: 'node_modules/.bin/mocha --bail test/**/*.test.ts' },
  coverageAnalysis: 'off',
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
