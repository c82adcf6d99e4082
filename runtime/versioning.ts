// The worker's Worker Versioning options (docs/temporal.md, "Upgrading workers"):
// --deployment-name / --build-id (or EP_WORKER_DEPLOYMENT_NAME / EP_WORKER_BUILD_ID) become the
// SDK's `workerDeploymentOptions`: the worker polls as that version of that Worker Deployment, and
// each workflow type's behavior is on its definition (contracts/versioning.ts; a type without one is
// pinned). Neither
// given: an unversioned worker, as before. A flag wins over its variable.
import type { ParseArgsConfig } from 'node:util';
import { DEFAULT_VERSIONING_BEHAVIOR } from '../contracts/versioning-behavior.ts';
import type { WorkflowVersioningBehavior } from '../contracts/versioning-behavior.ts';
import { OptionError } from './options.ts';

/** The options to spread into the worker's parseArgs `options` (no defaults: unset means "from the environment"). */
export const VERSIONING_OPTIONS = {
  'deployment-name': { type: 'string' },
  'build-id': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** Their lines for the worker's --help. */
export const VERSIONING_HELP = `  --deployment-name NAME    Worker Versioning: poll as a version of this Worker Deployment (env
                            EP_WORKER_DEPLOYMENT_NAME); needs a build ID. Unset: unversioned
  --build-id ID             this build's ID in the deployment, e.g. the commit (env
                            EP_WORKER_BUILD_ID; default the workflow bundle's hash). A new
                            version gets tasks only once it is made current:
                            temporal worker deployment set-current-version (docs/temporal.md)`;

export interface VersioningValues {
  'deployment-name'?: string | undefined;
  'build-id'?: string | undefined;
}

/** The SDK's WorkerDeploymentOptions (@temporalio/worker 1.24), spelled here so --help loads no SDK. */
export interface WorkerVersioning {
  version: { deploymentName: string; buildId: string };
  useWorkerVersioning: true;
  defaultVersioningBehavior: WorkflowVersioningBehavior;
}

/**
 * Longest deployment name or build ID the server takes: (limit.maxIDLength 1000 - 39) / 2, as
 * Temporal server 1.31 validates them (common/worker_versioning, ValidateDeploymentVersionFields).
 */
const MAX_LENGTH = 480;

/** `v` as the server will take it (its rules, checked here so the worker's start names the option). */
function checked(source: string, v: string, isName: boolean): string {
  if (v === '') throw new OptionError(`${source} must not be empty`);
  if (v.length > MAX_LENGTH) throw new OptionError(`${source} is longer than ${MAX_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\s]/.test(v)) {
    throw new OptionError(`${source} must not contain spaces or control characters, got ${JSON.stringify(v)}`);
  }
  if (v.startsWith('__')) throw new OptionError(`${source} must not start with '__' (the server reserves it)`);
  // The server writes a version as `<deployment>:<build ID>` (and `.` in older APIs).
  if (isName && /[.:]/.test(v))
    throw new OptionError(`${source} must not contain '.' or ':', got ${JSON.stringify(v)}`);
  return v;
}

/**
 * The worker's `workerDeploymentOptions`, or undefined for an unversioned worker. `defaultBuildId`
 * (the workflow bundle's key) is used when a deployment name is given without a build ID; without
 * it, a missing build ID is an OptionError. A build ID without a deployment name is one too.
 */
export function workerVersioning(
  values: VersioningValues,
  env: NodeJS.ProcessEnv = process.env,
  defaultBuildId?: string,
): WorkerVersioning | undefined {
  const pick = (flag: keyof VersioningValues, variable: string): [string | undefined, string] => {
    const v = values[flag];
    if (v !== undefined) return [v, `--${flag}`];
    const e = env[variable];
    return [e === '' ? undefined : e, variable];
  };
  const [name, nameSource] = pick('deployment-name', 'EP_WORKER_DEPLOYMENT_NAME');
  const [build, buildSource] = pick('build-id', 'EP_WORKER_BUILD_ID');
  if (name === undefined) {
    if (build !== undefined) {
      throw new OptionError(
        `${buildSource} is set but --deployment-name / EP_WORKER_DEPLOYMENT_NAME is not: a build ID is a version of a deployment (give both, or neither)`,
      );
    }
    return undefined;
  }
  const deploymentName = checked(nameSource, name, true);
  const buildId = build ?? defaultBuildId;
  if (buildId === undefined) {
    throw new OptionError(
      `${nameSource} is set but --build-id / EP_WORKER_BUILD_ID is not: name this build (e.g. the commit)`,
    );
  }
  return {
    version: {
      deploymentName,
      buildId: checked(build === undefined ? 'the default build ID' : buildSource, buildId, false),
    },
    useWorkerVersioning: true,
    defaultVersioningBehavior: DEFAULT_VERSIONING_BEHAVIOR,
  };
}
