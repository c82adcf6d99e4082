// The smoke activity: proves that a worker runs activities and routes their logs.
import { Context, log } from '@temporalio/activity';
import type { SmokeGreeting } from '../contracts/smoke.ts';

/** Returns a greeting for `name` and the attempt number; no I/O. */
export function smokeGreet(name: string): Promise<SmokeGreeting> {
  const { attempt } = Context.current().info;
  log.info('smoke activity ran', { greetee: name, attempt });
  return Promise.resolve({ greeting: `hello, ${name}`, attempt });
}
