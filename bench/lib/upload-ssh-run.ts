/**
 * One run of the SSH upload benchmark, as bench/upload-ssh.ts, bench/upload-ssh-rounds.ts and
 * bench/upload-ssh-blackhole.ts start it: wait for a quiet machine, make the file, run the rounds
 * and/or the black hole, print the header line and the tables, write `--json`.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { clearFaultRules } from '../../test/support/host-faults.ts';
import { fmtLoad, waitForQuiet } from './run.ts';
import { printHoles, runBlackholes } from './upload-ssh-blackhole.ts';
import type { HoleResult } from './upload-ssh-blackhole.ts';
import { makeUploadFile, sshBenchContext } from './upload-ssh-context.ts';
import { printRounds } from './upload-ssh-report.ts';
import { runRounds } from './upload-ssh-rounds.ts';
import type { RoundsResult, RoundsValues } from './upload-ssh-rounds.ts';

export interface SshBenchParts {
  /** The rounds' options: the header describes them; the rounds run when `runRounds`. */
  rounds?: RoundsValues;
  runRounds: boolean;
  /** The black hole runs when given, with virsh's hard timeout in seconds. */
  blackholeVirshTimeoutS?: number;
}

export async function runSshBench(
  common: { 'size-mib': string; host: string; 'max-load': string; json?: string | undefined },
  parts: SshBenchParts,
): Promise<void> {
  const ctx = sshBenchContext(common);
  const { host, sizeMiB } = ctx;
  const maxLoad = Number(common['max-load']);
  await waitForQuiet(maxLoad);
  const loadBefore = loadavg();
  const file = await makeUploadFile(ctx);
  let rounds: RoundsResult = { results: {}, loadDuring: [] };
  const holes: HoleResult[] = [];
  const started = new Date().toISOString();
  try {
    await clearFaultRules(host);
    if (parts.runRounds && parts.rounds !== undefined) rounds = runRounds(ctx, parts.rounds, file);
    if (parts.blackholeVirshTimeoutS !== undefined) {
      await waitForQuiet(maxLoad);
      holes.push(...(await runBlackholes(ctx, file, parts.blackholeVirshTimeoutS)));
    }
  } finally {
    await clearFaultRules(host);
    rmSync(file, { force: true });
  }
  const loadAfter = loadavg();
  const machine = `node ${process.version}, ${cpus().length} CPUs`;
  const load = `load (1/5/15 min) before ${fmtLoad(loadBefore)}, after ${fmtLoad(loadAfter)}`;
  if (parts.rounds !== undefined) {
    const children = parts.rounds['cold-start']
      ? 'cold (no compile cache)'
      : 'started as bin/ starts our entry points (warm compile cache)';
    console.log(
      `upload of ${sizeMiB} MiB to ${host.name} over SSH, ${parts.rounds.rounds} rounds, alternating; ${machine}, ` +
        `our children ${children}, ${load}, ` +
        `after each round ${rounds.loadDuring.map((x) => x.toFixed(2)).join(' ')}; started ${started}`,
    );
  } else {
    console.log(
      `black hole mid-upload of ${sizeMiB} MiB to ${host.name} over SSH; ${machine}, ${load}; started ${started}`,
    );
  }
  printRounds(rounds.results, sizeMiB);
  printHoles(holes);
  if (common.json !== undefined) {
    const roundsCount = parts.rounds === undefined ? undefined : Number(parts.rounds.rounds);
    writeFileSync(
      common.json,
      JSON.stringify(
        {
          started,
          loadBefore,
          loadAfter,
          sizeMiB,
          rounds: roundsCount,
          results: rounds.results,
          holes,
          loadDuring: rounds.loadDuring,
        },
        null,
        2,
      ),
    );
  }
}
