// A local API over the fake store (test/support/fake-store.ts), for trying a conformance tool
// against the routes without Temporal: `node test/support/api-fake-server.ts PORT TOKEN`.
import { TokenAuth } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { createLogger } from '../../lib/log/logger.ts';
import { FakeHosts } from './fake-hosts.ts';
import { FakePools, FakeStore } from './fake-store.ts';

const [port = '0', token = 'x'.repeat(32)] = process.argv.slice(2);
const store = new FakeStore();
const hosts = new FakeHosts();
hosts.add('lab', 'hv1', { proxies: 1 });
const app = await buildApi({
  store,
  pools: new FakePools(),
  hosts,
  warmer: { start: () => Promise.resolve({ workflowId: 'w', runId: 'r' }), view: () => Promise.resolve(undefined) },
  log: createLogger({ name: 'api-fake', level: 'warn' }),
  auth: new TokenAuth([{ token, role: 'admin' }]),
  taskQueue: 'tq',
});
process.stdout.write(`${await app.listen({ host: '127.0.0.1', port: Number(port) })}\n`);
