/**
 * egressctl's command table and its parts: every command is listed once in the top-level help and
 * has a help of its own; `egressctl dev` without dev/ (an installed image) says it needs a source
 * checkout instead of failing to load a module; the one whole-number option parser.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { COMMANDS, findCommand, TOP_HELP } from '../../cli/commands/index.ts';
import { loadDevStack } from '../../cli/commands/dev.ts';
import { CliError, EXIT } from '../../cli/http.ts';
import { OptionError, optionalWholeNumber, wholeNumber } from '../../runtime/options.ts';

describe('egressctl command table', () => {
  it('names every command once; each has its usage in the top-level help and a help that starts with its name', () => {
    const names = COMMANDS.map((c) => c.name);
    assert.equal(new Set(names).size, names.length);
    for (const c of COMMANDS) {
      assert.ok(c.usage.startsWith(c.name), c.usage);
      assert.ok(TOP_HELP.includes(`  ${c.usage}\n`), c.name);
      assert.ok(c.help.startsWith(`egressctl ${c.name}`), c.help);
      for (const option of Object.keys(c.options)) assert.ok(c.help.includes(`--${option}`), `${c.name}: --${option}`);
    }
  });

  it('finds a command by its words, not by a prefix of them', () => {
    assert.equal(findCommand(['proxy', 'up', 'main'])?.name, 'proxy up');
    assert.equal(findCommand(['hosts', 'check'])?.name, 'hosts check');
    assert.equal(findCommand(['proxy']), undefined);
    assert.equal(findCommand(['host-check']), undefined, 'the older CLI spelling is gone');
  });

  it('dev without dev/ is a usage error (2) saying it needs a source checkout', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ep-no-dev-'));
    try {
      await assert.rejects(loadDevStack(root), (err: unknown) => {
        assert.ok(err instanceof CliError);
        assert.equal(err.code, EXIT.usage);
        assert.match(err.message, /needs a source checkout/);
        assert.ok(err.message.includes(join(root, 'dev', 'stack.ts')));
        return true;
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('dev in the checkout loads the dev stack', async () => {
    assert.equal(typeof (await loadDevStack()).runDev, 'function');
  });
});

describe('wholeNumber: the one option parser for counts, ports and durations', () => {
  it('accepts whole numbers in range and names the option otherwise', () => {
    assert.equal(wholeNumber('timeout-ms', '30000'), 30_000);
    assert.equal(wholeNumber('port', '0', { min: 0, max: 65535 }), 0);
    const bad: [string, { min?: number; max?: number }, RegExp][] = [
      ['0', {}, /^--n must be a positive whole number, got "0"$/],
      ['1.5', {}, /positive whole number/],
      ['x', {}, /positive whole number, got "x"/],
      ['', {}, /positive whole number, got ""/],
      ['-1', { min: 0 }, /^--n must be a whole number ≥ 0, got "-1"$/],
      ['70000', { min: 0, max: 65535 }, /^--n must be at most 65535, got 70000$/],
    ];
    for (const [text, range, message] of bad) {
      assert.throws(
        () => wholeNumber('n', text, range),
        (err: unknown) => err instanceof OptionError && message.test(err.message),
      );
    }
  });

  it('gives the default when the option is absent', () => {
    assert.equal(optionalWholeNumber('wait-ms', undefined, 60_000), 60_000);
    assert.equal(optionalWholeNumber('wait-ms', undefined, undefined), undefined);
    assert.equal(optionalWholeNumber('wait-ms', '5', 60_000), 5);
  });
});
