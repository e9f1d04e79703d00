// Runs StrykerJS for one module with the test files that cover it (the rest of the options: stryker.config.mjs).
//   npm run test:mutation -- --mutate server/auth/tokens.ts --testFiles test/auth-tokens.test.ts,test/auth.test.ts
// --mutate and --testFiles take comma-separated lists and may repeat (a module may be narrowed to lines:
// server/auth/tokens.ts:37-88); --concurrency and --timeoutMS pass through; --reportDir (default reports/mutation).
// --runner mocha (default): one test process per worker, every mutant switched on at run time, and only the tests that
// reached a mutant run for it. --runner command: a fresh mocha process per mutant on every named test file (slow; any
// failing run counts as a kill), for a mutant the in-process runner cannot judge.
import { resolve } from 'node:path';
import { Stryker } from '@stryker-mutator/core';

type Options = NonNullable<ConstructorParameters<typeof Stryker>[0]>;
const config = ((await import(new URL('../stryker.config.mjs', import.meta.url).href)) as { default: Options }).default;

interface Args {
  mutate: string[];
  testFiles: string[];
  concurrency?: number;
  timeoutMS?: number;
  reportDir?: string;
  runner: 'mocha' | 'command';
}

function parse(argv: string[]): Args {
  const args: Args = { mutate: [], testFiles: [], runner: 'mocha' };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v.startsWith('--')) throw new Error(`${flag} needs a value`);
      return v;
    };
    const list = () => value().split(',').map((s) => s.trim()).filter(Boolean);
    if (flag === '--mutate' || flag === '-m') args.mutate.push(...list());
    else if (flag === '--testFiles' || flag === '--tests' || flag === '-t') args.testFiles.push(...list());
    else if (flag === '--concurrency' || flag === '-c') args.concurrency = Number(value());
    else if (flag === '--timeoutMS') args.timeoutMS = Number(value());
    else if (flag === '--reportDir') args.reportDir = value();
    else if (flag === '--runner') {
      const runner = value();
      if (runner !== 'mocha' && runner !== 'command') throw new Error('--runner is mocha or command');
      args.runner = runner;
    }
    else throw new Error(`unknown option ${flag} (known: --mutate, --testFiles, --runner, --concurrency, --timeoutMS, --reportDir)`);
  }
  if (args.mutate.length === 0) throw new Error('name the module to mutate: --mutate server/auth/tokens.ts');
  if (args.testFiles.length === 0) throw new Error('name the tests that cover it: --testFiles test/auth-tokens.test.ts');
  if (args.concurrency !== undefined && !(args.concurrency >= 1 && args.concurrency <= 2)) throw new Error('--concurrency is 1 or 2 on a shared machine');
  return args;
}

let args: Args;
try {
  args = parse(process.argv.slice(2));
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}

// Quoted for the shell the command runner uses; --bail: the first failing test kills the mutant, the rest need not run.
// mocha by its path from here: the sandbox gets no node_modules of its own when this one is a symlink (a worktree's),
// and finds the packages through its parent directories instead.
const mocha = `'${resolve('node_modules/.bin/mocha').replaceAll("'", "'\\''")}'`;
const quoted = args.testFiles.map((f) => `'${f.replaceAll("'", "'\\''")}'`).join(' ');
const runner: Options =
  args.runner === 'mocha'
    ? {
        // mocha's options (root hooks, extension, timeout) come from .mocharc.json; its node-option does not reach the
        // runner's worker process, so tsx is loaded here.
        testRunner: 'mocha',
        testRunnerNodeArgs: ['--import', 'tsx'],
        mochaOptions: { spec: args.testFiles },
        coverageAnalysis: 'perTest',
      }
    : {
        testRunner: 'command',
        // A test server that is merely slow to start on a loaded machine must not count as a killed mutant.
        commandRunner: { command: `TEST_SERVER_START_TIMEOUT_MS=\${TEST_SERVER_START_TIMEOUT_MS:-180000} ${mocha} --bail ${quoted}` },
        coverageAnalysis: 'off',
      };
// The in-process runner's workers inherit this process's environment: the same allowance for a slow test server.
if (args.runner === 'mocha') process.env.TEST_SERVER_START_TIMEOUT_MS ??= '180000';
const stryker = new Stryker({
  ...config,
  ...runner,
  mutate: args.mutate,
  ...(args.concurrency ? { concurrency: args.concurrency } : {}),
  ...(args.timeoutMS ? { timeoutMS: args.timeoutMS } : {}),
  // Two runs at once need their own reports and sandboxes.
  ...(args.reportDir
    ? {
        htmlReporter: { fileName: `${args.reportDir}/index.html` },
        jsonReporter: { fileName: `${args.reportDir}/mutation.json` },
        tempDirName: `.stryker-tmp/${args.reportDir.replaceAll(/[^\w.-]/g, '_')}`,
      }
    : {}),
});
const results = await stryker.runMutationTest();
const counts: Record<string, number> = {};
for (const r of results) counts[r.status] = (counts[r.status] ?? 0) + 1;
console.log(`mutants by status: ${JSON.stringify(counts)}; report: ${args.reportDir ?? 'reports/mutation'}/index.html`);
