/**
 * The rounds of the SSH upload benchmark: every variant (ours over SSH per chunk size × cipher,
 * virsh over qemu+ssh, the ssh pipes, the local socket, `node -e 0`) uploads the same file into a
 * fresh volume, each round in a rotated order, and its whole-process (and, for ours, in-process)
 * figures are recorded. bench/upload-ssh-report.ts prints them.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_UPLOAD_CHUNK_BYTES } from '../../lib/libvirt/upload.ts';
import { localSocketPath } from '../../test/support/testhosts.ts';
import { deleteVol, freshVol, inHost, settle } from './host-vols.ts';
import { BENCH_DIR, timed } from './run.ts';
import type { SshBenchContext } from './upload-ssh-context.ts';

/** The options of the rounds (for `parseArgs`). */
export const ROUNDS_OPTIONS = {
  rounds: { type: 'string', default: '5' },
  chunks: { type: 'string', default: String(DEFAULT_UPLOAD_CHUNK_BYTES) },
  ciphers: { type: 'string', default: 'aes128-gcm@openssh.com' },
  'read-bytes': { type: 'string', default: String(256 * 1024) },
  only: { type: 'string' },
  'stock-ssh2': { type: 'boolean', default: false },
  'node-flags': { type: 'string', default: '' },
  'cold-start': { type: 'boolean', default: false },
} as const;

/** The parsed values of ROUNDS_OPTIONS. */
export interface RoundsValues {
  rounds: string;
  chunks: string;
  ciphers: string;
  'read-bytes': string;
  only?: string | undefined;
  'stock-ssh2': boolean;
  'node-flags': string;
  'cold-start': boolean;
}

export const GCM = 'aes128-gcm@openssh.com';

/** One upload's figures: whole process (what a command's user feels) and in process (what a worker feels). */
export interface Sample {
  wholeS: number;
  wholeCpuS: number;
  peakRssKiB: number;
  inS?: number;
  inCpuS?: number;
  growth?: number;
  /** Ours: from the process's start to the dial (or connect), and from the confirmed finish to its last line. */
  startS?: number;
  closeS?: number;
}
export interface Row {
  samples: Sample[];
  ours: boolean;
  path: 'ssh' | 'local';
}
export interface RoundsResult {
  results: Record<string, Row>;
  /** The 1-minute load average after each round. */
  loadDuring: number[];
}

export const oursKey = (chunk: number, cipher: string, stock = false): string =>
  `ours over SSH, chunk ${chunk} B, ${cipher}${stock ? ", ssh2's stock writes" : ''}`;
const oursLocalKey = (chunk: number, chunks: number[]): string =>
  chunks.length > 1 ? `ours, local socket, chunk ${chunk} B` : 'ours, local socket';
export const VIRSH = 'virsh vol-upload, qemu+ssh (OpenSSH default cipher)';
export const VIRSH_LOCAL = 'virsh vol-upload, local socket';
export const PIPE_DEFAULT = "pipe: cat | ssh 'cat >/dev/null' (default cipher)";
export const PIPE_GCM = `pipe: cat | ssh -c ${GCM} 'cat >/dev/null'`;
export const NODE_FLOOR = 'node doing nothing (`-e 0`), started as ours are';

/** The JSON line of bench/upload-once.ts and bench/upload-ssh-once.ts. */
interface OnceResult {
  seconds: number;
  startedMs: number;
  endMs: number;
  idleRss: number;
  peakRss: number;
  cpuUserS: number;
  cpuSystemS: number;
  cipher?: string;
}

/**
 * How our children start: as the bin/ launchers start our entry points, `--import
 * bin/compile-cache.mjs` turns Node's compile cache on (in a directory of this run, filled before
 * the first round) before the child's TypeScript loads. With --cold-start they start as a bare
 * `node FILE.ts` with no cache: what the first start after an install or upgrade pays.
 */
function childLaunch(coldStart: boolean): { env: NodeJS.ProcessEnv; launch: string[]; dispose(): void } {
  const cacheHome = coldStart ? undefined : mkdtempSync(join(tmpdir(), 'ep-bench-cache-'));
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['NODE_COMPILE_CACHE'];
  if (cacheHome === undefined) env['NODE_DISABLE_COMPILE_CACHE'] = '1';
  else env['XDG_CACHE_HOME'] = cacheHome;
  const launch = coldStart ? [] : ['--import', join(BENCH_DIR, '../bin/compile-cache.mjs')];
  return {
    env,
    launch,
    dispose: () => {
      if (cacheHome !== undefined) rmSync(cacheHome, { recursive: true, force: true });
    },
  };
}

/** Runs `values.rounds` rounds of every variant `values.only` asks for, uploading `file`. */
export function runRounds(ctx: SshBenchContext, values: RoundsValues, file: string): RoundsResult {
  const { host, sizeMiB } = ctx;
  const rounds = Number(values.rounds);
  const chunks = values.chunks.split(',').map(Number);
  const ciphers = values.ciphers.split(',');
  const nodeFlags = values['node-flags'].split(' ').filter(Boolean);
  const coldStart = values['cold-start'];
  const results: Record<string, Row> = {};
  const loadDuring: number[] = [];
  const record = (key: string, ours: boolean, path: 'ssh' | 'local', sample: Sample): void => {
    (results[key] ??= { samples: [], ours, path }).samples.push(sample);
  };
  const children = childLaunch(coldStart);
  const { env: oursEnv, launch } = children;
  const vol = `ep-bench-ssh-${process.pid}.raw`;
  const only = values.only === undefined ? undefined : new Set(values.only.split(','));
  const want = (what: string): boolean => only === undefined || only.has(what);
  /** Runs one of our upload children into a fresh volume, as every row of ours is run: its line and figures. */
  const runOurs = (script: string, args: string[]): { r: OnceResult; sample: Sample } => {
    freshVol(host, vol, sizeMiB);
    const t = timed(
      [
        process.execPath,
        ...nodeFlags,
        ...launch,
        join(BENCH_DIR, script),
        '--vol',
        vol,
        '--file',
        file,
        '--read-bytes',
        values['read-bytes'],
        ...args,
      ],
      oursEnv,
    );
    const r = JSON.parse(t.stdout) as OnceResult;
    return {
      r,
      sample: {
        wholeS: t.secs,
        wholeCpuS: t.cpu,
        peakRssKiB: t.maxRssKiB,
        inS: r.seconds,
        inCpuS: r.cpuUserS + r.cpuSystemS,
        growth: r.peakRss - r.idleRss,
        startS: r.startedMs / 1000,
        closeS: (r.endMs - r.startedMs) / 1000 - r.seconds,
      },
    };
  };
  const ours =
    (chunk: number, cipher: string, stock = false) =>
    (): void => {
      const { r, sample } = runOurs('upload-ssh-once.ts', [
        '--host',
        String(ctx.hostIndex),
        '--chunk',
        String(chunk),
        '--cipher',
        cipher,
        ...(stock ? ['--stock-ssh2'] : []),
      ]);
      if (r.cipher !== cipher) throw new Error(`negotiated ${String(r.cipher)}, asked for ${cipher}`);
      record(oursKey(chunk, cipher, stock), true, 'ssh', sample);
    };
  const oursLocal = (chunk: number) => (): void => {
    const { sample } = runOurs('upload-once.ts', [
      '--socket',
      localSocketPath(host),
      '--pool',
      host.pool,
      '--chunk',
      String(chunk),
    ]);
    record(oursLocalKey(chunk, chunks), true, 'local', sample);
  };
  const pipe = (key: string, cipherArg: string) => (): void => {
    settle();
    const p = timed([
      'bash',
      '-c',
      `cat "$1" | ssh -F "$2" ${cipherArg} "$3" 'cat >/dev/null'`,
      '_',
      file,
      ctx.sshConfig,
      host.name,
    ]);
    record(key, false, 'ssh', { wholeS: p.secs, wholeCpuS: p.cpu, peakRssKiB: p.maxRssKiB });
  };
  // What any Node command pays before and after its work, under the same wrapper: the floor of
  // our whole-process figures.
  const nodeFloor = (): void => {
    const t = timed([process.execPath, ...nodeFlags, ...launch, '-e', '0'], oursEnv);
    record(NODE_FLOOR, false, 'local', { wholeS: t.secs, wholeCpuS: t.cpu, peakRssKiB: t.maxRssKiB });
  };
  const jobs: (() => void)[] = [
    ...(want('ours') ? ciphers.flatMap((cipher) => chunks.map((chunk) => ours(chunk, cipher))) : []),
    ...(want('ours') || want('local') ? [nodeFloor] : []),
    ...(want('ours') && values['stock-ssh2'] ? [ours(chunks[0]!, ciphers[0]!, true)] : []),
    ...(want('virsh')
      ? [
          (): void => {
            freshVol(host, vol, sizeMiB);
            const v = timed(['virsh', '-q', '-c', ctx.virshUri, 'vol-upload', '--pool', host.pool, vol, file]);
            record(VIRSH, false, 'ssh', { wholeS: v.secs, wholeCpuS: v.cpu, peakRssKiB: v.maxRssKiB });
          },
        ]
      : []),
    ...(want('pipes') ? [pipe(PIPE_DEFAULT, ''), pipe(PIPE_GCM, `-c ${GCM}`)] : []),
    ...(want('local')
      ? [
          ...chunks.map(oursLocal),
          (): void => {
            freshVol(host, vol, sizeMiB);
            // virsh inside the host's namespaces, on its unix socket (nsenter's own cost is a few ms).
            const v = timed(inHost(host, 'virsh', '-q', 'vol-upload', '--pool', host.pool, vol, file));
            record(VIRSH_LOCAL, false, 'local', { wholeS: v.secs, wholeCpuS: v.cpu, peakRssKiB: v.maxRssKiB });
          },
        ]
      : []),
  ];
  try {
    if (!coldStart) {
      // Fill the cache: each child loads its modules and stops at its missing arguments.
      for (const script of ['upload-ssh-once.ts', 'upload-once.ts']) {
        spawnSync(process.execPath, [...launch, join(BENCH_DIR, script)], { env: oursEnv, stdio: 'ignore' });
      }
    }
    try {
      for (let round = 0; round < rounds; round++) {
        // Each round starts one job later, so that no variant always runs right after the same other.
        for (let i = 0; i < jobs.length; i++) jobs[(i + round) % jobs.length]!();
        loadDuring.push(loadavg()[0]!);
        console.error(`# round ${round + 1}/${rounds} done (load ${loadavg()[0]!.toFixed(2)})`);
      }
    } finally {
      deleteVol(host, vol);
    }
  } finally {
    children.dispose();
  }
  return { results, loadDuring };
}
