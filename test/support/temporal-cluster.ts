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

/** The TEMPORAL_* variables of `s` (what `scripts/temporal cluster env` exports), for a worker, the API or egressctl. */
export function clusterEnv(s: TemporalSettings): Record<string, string> {
  const env: Record<string, string> = { TEMPORAL_ADDRESS: s.address, TEMPORAL_NAMESPACE: s.namespace };
  if (s.tls?.certFile) env['TEMPORAL_TLS_CERT'] = s.tls.certFile;
  if (s.tls?.keyFile) env['TEMPORAL_TLS_KEY'] = s.tls.keyFile;
  if (s.tls?.caFile) env['TEMPORAL_TLS_CA'] = s.tls.caFile;
  if (s.tls?.serverName) env['TEMPORAL_TLS_SERVER_NAME'] = s.tls.serverName;
  return env;
}

/**
 * Runs `scripts/temporal cluster <args>` (`kill-server`, `pg-stop`, `pg-start`, `up`, ...), bounded
 * by `timeoutMs`; rejects with the command's last lines of stderr when it fails.
 */
export async function clusterCommand(args: string[], timeoutMs = 120_000): Promise<string> {
  try {
    const { stderr } = await execFileAsync(script, ['cluster', ...args], { timeout: timeoutMs, encoding: 'utf8' });
    return stderr;
  } catch (cause) {
    const stderr = (cause as { stderr?: string }).stderr ?? '';
    throw new Error(
      `scripts/temporal cluster ${args.join(' ')} failed: ${stderr.trim().split('\n').slice(-8).join('\n')}`,
      {
        cause,
      },
    );
  }
}

/**
 * Puts the cluster back as other tests expect it after a fault: `up` starts PostgreSQL when it was
 * stopped and the server when it was killed, and waits until it is healthy. For `after` hooks.
 */
export async function clusterRestore(): Promise<void> {
  await clusterCommand(['up'], CLUSTER_UP_TIMEOUT_MS);
}
