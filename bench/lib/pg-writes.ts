/**
 * What the cluster's PostgreSQL writes (`scripts/temporal cluster`): rows inserted, updated and
 * deleted in Temporal's two databases (pg_stat_database) and WAL bytes (pg_stat_wal), read with
 * psql as the cluster's own database user. Counters, so a rate is the difference of two samples
 * over the time between them. PostgreSQL's backends flush their counts at most once a second and
 * when idle, so a sample lags the writes by a second or two: rates over a window of a minute or
 * more are what to read.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../test/support/temporal.ts';

const pexec = promisify(execFile);

export interface PgWrites {
  /** tup_inserted + tup_updated + tup_deleted, summed over `temporal` and `temporal_visibility`. */
  rows: number;
  walBytes: number;
}

/** The psql of the newest PostgreSQL under /usr/lib/postgresql, as scripts/temporal-cluster picks it. */
function psqlPath(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin/psql')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error(`no psql under ${root}: scripts/temporal cluster up installs PostgreSQL`);
  return join(root, versions[0]!, 'bin/psql');
}

/** The cluster's PostgreSQL port, from its last `up` (.data/temporal-cluster/ports: frontend, PostgreSQL). */
function pgPort(): string {
  const file = join(PROJECT_ROOT, '.data/temporal-cluster/ports');
  const port = readFileSync(file, 'utf8').trim().split(/\s+/)[1];
  if (port === undefined || !/^\d+$/.test(port)) throw new Error(`${file}: no PostgreSQL port; is the cluster up?`);
  return port;
}

/** One sample of the cluster's write counters. */
export async function pgWrites(): Promise<PgWrites> {
  const sql =
    "SELECT (SELECT sum(tup_inserted + tup_updated + tup_deleted) FROM pg_stat_database WHERE datname IN ('temporal', 'temporal_visibility')), (SELECT wal_bytes FROM pg_stat_wal)";
  const { stdout } = await pexec(
    psqlPath(),
    [
      '-X',
      '-q',
      '-t',
      '-A',
      '-F',
      ' ',
      '-h',
      '127.0.0.1',
      '-p',
      pgPort(),
      '-U',
      'temporal',
      '-d',
      'temporal',
      '-c',
      sql,
    ],
    { env: { ...process.env, PGPASSWORD: 'temporal', PGCONNECT_TIMEOUT: '5' }, timeout: 15_000 },
  );
  const [rows, wal] = stdout.trim().split(' ').map(Number);
  if (!Number.isFinite(rows) || !Number.isFinite(wal))
    throw new Error(`pg_stat_database/pg_stat_wal: unexpected ${JSON.stringify(stdout)}`);
  return { rows: rows!, walBytes: wal! };
}
