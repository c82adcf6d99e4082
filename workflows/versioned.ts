// The workflow bundle's entry for a versioned worker (runtime/versioning.ts: --deployment-name and
// --build-id): the worker's workflows (./index.ts) with each one's Worker Versioning behavior set
// on its definition (./versioning.ts). An unversioned worker bundles ./index.ts instead: the
// server refuses a workflow task completion that carries a versioning behavior from a worker
// without deployment options.
export * from './index.ts';
import './versioning.ts';
