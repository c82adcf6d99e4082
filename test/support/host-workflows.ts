/** The workflow bundle of the host workflow's tests: the project's workflows and the stand-ins. */
export * from '../../workflows/index.ts';
export { hostTestPoolStandIn, hostTestProxyStandIn } from './host-stand-ins.ts';
