// Every activity the worker registers. Workflows import this module with `import type` only.
export * from './smoke.ts';
