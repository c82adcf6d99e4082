/**
 * External tools a test reads our output with (xmllint, virt-xml-validate, isoinfo, bsdtar, 7z…):
 * whether one is installed, and the skip-locally, fail-under-CI rule when it is not.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';

const pexec = promisify(execFile);

/** Whether `cmd` is on PATH. */
export async function have(cmd: string): Promise<boolean> {
  try {
    await pexec('sh', ['-c', `command -v ${cmd}`], { timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

/** Skips (locally) or fails (CI) when `cmd` is missing. Returns whether the test may go on. */
export async function needTool(t: TestContext, cmd: string, pkg: string): Promise<boolean> {
  if (await have(cmd)) return true;
  const why = `${cmd} is not installed (apt-get install ${pkg})`;
  if (process.env.CI) assert.fail(why);
  t.skip(why);
  return false;
}
