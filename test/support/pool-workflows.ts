/** The workflow bundle of the pool's workflow tests: the project's workflows and the member stand-in. */
export * from '../../workflows/index.ts';
export { poolMemberStandIn } from './pool-member-workflow.ts';
