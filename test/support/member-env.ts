/**
 * The Env of a workflow test file whose proxies report to a pool: the project's workflows bundled
 * with the stand-in pool (member-workflows.ts: the report sink) beside them; loaded before the
 * file's first test, closed after its last (as workflow-harness.ts fileEnv does).
 */
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { installTestRuntime, withTimeout } from './temporal.ts';
import { Env } from './workflow-harness.ts';

class MemberEnv extends Env {
  private own: WorkflowBundleWithSourceMap | undefined;
  override get bundle(): WorkflowBundleWithSourceMap {
    if (this.own === undefined) throw new Error('no workflow bundle: call load() first');
    return this.own;
  }
  override async load(): Promise<void> {
    installTestRuntime();
    const quiet = () => undefined;
    const logger = { log: quiet, trace: quiet, debug: quiet, info: quiet, warn: quiet, error: quiet };
    const workflowsPath = fileURLToPath(new URL('./member-workflows.ts', import.meta.url));
    this.own = await withTimeout(bundleWorkflowCode({ workflowsPath, logger }), 60_000, 'bundle the workflows');
  }
}

/** The file's Env with the report sink in its bundle. */
export function memberFileEnv(): Env {
  const e = new MemberEnv();
  before(() => e.load());
  after(() => e.close());
  return e;
}
