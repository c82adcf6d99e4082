/**
 * The long-running entry points as an operator first meets them: `--help` exits 0, an unknown
 * option or a bad value exits 2 with the error (and, for an unknown option, the help), and all of
 * it happens before the Temporal SDK is loaded, so that the answer comes at once and does not
 * depend on Temporal being up. TEMPORAL_ADDRESS points where nothing listens: an option that was
 * checked only after connecting would exit 1, not 2.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { runCommand } from '../support/run.ts';
import type { CommandResult } from '../support/run.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** On exit, the child says whether any Temporal SDK module was loaded (they are CommonJS). */
const SDK_PROBE =
  'data:text/javascript,' +
  encodeURIComponent(
    "import { createRequire } from 'node:module'; const cache = createRequire(process.cwd() + '/').cache;" +
      " process.on('exit', () => process.stderr.write(`sdk-loaded=${Object.keys(cache).some((k) => k.includes('@temporalio'))}\\n`));",
  );

const run = (bin: string, args: string[]): Promise<CommandResult> =>
  runCommand(process.execPath, ['--import', SDK_PROBE, join(root, 'bin', bin), ...args], {
    cwd: root,
    timeoutMs: 30_000,
    env: { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:9' },
  });

const CASES: { bin: string; help: RegExp; bad: [string[], RegExp][] }[] = [
  {
    bin: 'worker',
    help: /--metrics-listen/,
    bad: [
      [['--max-activities', 'x'], /--max-activities must be a positive whole number/],
      [['--metrics-listen', 'nope'], /--metrics-listen must be HOST:PORT/],
      [['--max-cached-workflows', '10'], /--max-cached-workflows \(10\) must be at least --max-workflow-tasks \(40\)/],
    ],
  },
  {
    bin: 'api',
    help: /--token-file/,
    bad: [
      [['--port', '70000', '--token-file', '/nonexistent'], /--port must be at most 65535/],
      [[], /--token-file FILE is required/],
    ],
  },
  {
    bin: 'egressctl',
    help: /hosts check/,
    bad: [
      [['smoke', '--timeout-ms', '0'], /--timeout-ms must be a positive whole number/],
      [['proxy', 'up'], /proxy up needs the proxy NAME/],
      [['proxy', 'up', 'p1', '--wait-ms', '0'], /--wait-ms must be a positive whole number/],
      [['proxy', 'up', 'p1', '--bogus'], /Unknown option '--bogus'.*see egressctl proxy up --help/],
      [['hosts', 'check'], /hosts check needs --providers/],
      [['dev', '--api-port', 'x'], /--api-port must be a positive whole number/],
      [['proxy', 'list', '--page-size', '1.5'], /--page-size must be a positive whole number/],
    ],
  },
];

/** The commands of egressctl that talk to Temporal or SSH: their --help loads neither. */
const EGRESSCTL_COMMANDS = [['smoke'], ['proxy', 'up'], ['hosts', 'check'], ['dev'], ['proxy', 'create']];

describe('entry points answer --help and bad options before loading the SDK', { timeout: 120_000 }, () => {
  for (const { bin, help, bad } of CASES) {
    it(`bin/${bin}`, async () => {
      const h = await run(bin, ['--help']);
      assert.equal(h.code, 0, h.stderr);
      assert.match(h.stdout, help);
      assert.match(h.stderr, /sdk-loaded=false/);

      const unknown = await run(bin, ['--bogus']);
      assert.equal(unknown.code, 2, unknown.stderr);
      assert.match(unknown.stderr, /Unknown option '--bogus'/);
      assert.match(unknown.stderr, help, 'the help follows the error');
      assert.match(unknown.stderr, /sdk-loaded=false/);

      for (const [args, message] of bad) {
        const r = await run(bin, args);
        assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, message);
        assert.match(r.stderr, /sdk-loaded=false/);
      }
    });
  }
});

describe('egressctl commands answer --help without loading the SDK', { timeout: 120_000 }, () => {
  for (const words of EGRESSCTL_COMMANDS) {
    it(`egressctl ${words.join(' ')} --help`, async () => {
      const r = await run('egressctl', [...words, '--help']);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(r.stdout.startsWith(`egressctl ${words.join(' ')}`), r.stdout);
      assert.match(r.stdout, /Exit codes:/);
      assert.match(r.stderr, /sdk-loaded=false/);
    });
  }
});
