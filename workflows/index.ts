// Every workflow the worker registers (one per file). Export workflow functions only: the worker
// registers each exported function as a workflow type.
export { smokeWorkflow } from './smoke.ts';
export { proxyLifecycle } from './proxy/index.ts';
export { ensureImageWorkflow } from './image.ts';
export { orphanGcWorkflow, providerHealthWorkflow } from './fleet.ts';
export { warmImageWorkflow } from './warm.ts';
export { catalogWorkflow } from './catalog.ts';
export { poolWorkflow } from './pool/index.ts';
export { hostWorkflow } from './host.ts';
export { hostMonitorWorkflow } from './host-monitor.ts';
