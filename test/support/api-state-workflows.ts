// Stand-in workflows for test/integration/api-read-states.test.ts: one type that ends the way its
// input says (completes, fails, continues as new once, or waits until cancelled), started under
// the IDs the API reads (warm/<entry>/<key>, proxy/<entry>/<name>), so every read route meets
// every execution status without the real workflows' hosts.
import { ApplicationFailure, condition, continueAsNew } from '@temporalio/workflow';

export type StateMode = 'complete' | 'fail' | 'wait' | 'continue-then-complete' | 'continue-then-wait';

export async function apiStateStub(mode: StateMode): Promise<unknown> {
  switch (mode) {
    case 'complete':
      return { entry: 'stub', key: 'stub', hosts: [] };
    case 'fail':
      throw ApplicationFailure.create({ message: 'stub failure', nonRetryable: true });
    case 'continue-then-complete':
      return continueAsNew<typeof apiStateStub>('complete');
    case 'continue-then-wait':
      return continueAsNew<typeof apiStateStub>('wait');
    case 'wait':
      await condition(() => false);
      return undefined;
  }
}
