// The workflows the bench worker registers: workflows/index.ts's without its Worker Versioning
// behaviors (workflows/versioning.ts). The bench worker is unversioned, and a server refuses a
// workflow task completed with a versioning behavior by a worker without deployment options
// ("versioning behavior cannot be specified without deployment options being set with versioned
// mode"): every task would time out. The same functions, so the same histories.
export { smokeWorkflow } from '../../workflows/smoke.ts';
export { proxyLifecycle } from '../../workflows/proxy/index.ts';
export { ensureImageWorkflow } from '../../workflows/image.ts';
export { orphanGcWorkflow, providerHealthWorkflow } from '../../workflows/fleet.ts';
export { warmImageWorkflow } from '../../workflows/warm.ts';
export { catalogWorkflow } from '../../workflows/catalog.ts';
export { poolWorkflow } from '../../workflows/pool/index.ts';
export { hostWorkflow } from '../../workflows/host.ts';
