/** The workflow bundle of the proxy tests that need a pool to report to: the project's workflows and the report sink. */
export * from '../../workflows/index.ts';
export { memberReportSink } from './report-sink-workflow.ts';
