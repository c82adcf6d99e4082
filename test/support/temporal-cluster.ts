/**
 * Tests against `scripts/temporal cluster`: the real Temporal server on PostgreSQL with an mTLS
 * frontend. `clusterUp` starts it (idempotent; the first run on a machine builds the server, so
 * it is bounded generously) and returns where it is and the credentials its `env` command prints.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { temporalSettings } from '../../client/connection.ts';
import type { TemporalSettings } from '../../client/connection.ts';
import { PROJECT_ROOT } from './temporal.ts';

const execFileAsync = promisify(execFile);

/** A cold `up` builds the server from the Go module proxy (about 6 min on 2 busy cores); a warm one takes seconds. */
export const CLUSTER_UP_TIMEOUT_MS = 15 * 60_000;
/** Where `scripts/temporal cluster` keeps its certificates (dev/cluster/make-certs). */
export const CLUSTER_TLS_DIR = join(PROJECT_ROOT, '.data/temporal-cluster/tls');

const script = join(PROJECT_ROOT, 'scripts/temporal');

/** Runs `scripts/temporal cluster up` (mTLS) and returns the settings of `scripts/temporal cluster env`. */
export async function clusterUp(): Promise<TemporalSettings> {
  try {
    await execFileAsync(script, ['cluster', 'up'], { timeout: CLUSTER_UP_TIMEOUT_MS, encoding: 'utf8' });
  } catch (cause) {
    const stderr = (cause as { stderr?: string }).stderr ?? '';
    throw new Error(`scripts/temporal cluster up failed: ${stderr.trim().split('\n').slice(-8).join('\n')}`, {
      cause,
    });
  }
  const { stdout } = await execFileAsync(script, ['cluster', 'env'], { timeout: 30_000, encoding: 'utf8' });
  const env: NodeJS.ProcessEnv = {};
  for (const line of stdout.split('\n')) {
    const m = /^export ([A-Z_]+)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!.replace(/^'(.*)'$/, '$1');
  }
  if (env['TEMPORAL_TLS_CERT'] === undefined) {
    throw new Error('scripts/temporal cluster runs without TLS (--plain): run scripts/temporal cluster down first');
  }
  return temporalSettings(env);
}
