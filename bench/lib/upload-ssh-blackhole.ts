/**
 * The black hole of the SSH upload benchmark: the host's SSH port black-holed mid-upload (every
 * segment dropped both ways, no RST) for virsh and for ours; when each noticed and gave up. virsh
 * gets a hard timeout so that the bench always ends.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createReadStream, createWriteStream, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorKind } from '../../lib/errors.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import type { HostLinksOptions } from '../../lib/hostlink/pool.ts';
import { injectSshFault, signalPids, sshdPidsFor, waitGone, withNewSshPort } from '../../test/support/host-faults.ts';
import { hostTarget } from '../../test/support/testhosts.ts';
import type { TestHost } from '../../test/support/testhosts.ts';
import { deleteVolPatiently, freshVol } from './host-vols.ts';
import { sleep } from './run.ts';
import { MiB } from './stats.ts';
import type { SshBenchContext } from './upload-ssh-context.ts';

/** The options of the black hole (for `parseArgs`). */
export const BLACKHOLE_OPTIONS = {
  'virsh-timeout-s': { type: 'string', default: '90' },
} as const;

export interface HoleResult {
  client: string;
  keepalive: string;
  detectedS: number;
  tornDownS: number;
  outcome: string;
}

/** Ours with its defaults and with a 2 s keepalive, then virsh with and without ssh's own keepalive. */
export async function runBlackholes(ctx: SshBenchContext, file: string, virshTimeoutS: number): Promise<HoleResult[]> {
  return [
    await blackholeOurs(ctx, file, 'ours (defaults)', {}),
    await blackholeOurs(ctx, file, 'ours (keepalive 2 s × 3)', {
      dial: { keepaliveIntervalMs: 2_000, keepaliveCountMax: 3 },
      client: { keepalive: { intervalMs: 2_000, countMax: 3 } },
    }),
    await blackholeVirsh(ctx, file, true, virshTimeoutS),
    await blackholeVirsh(ctx, file, false, virshTimeoutS),
  ];
}

export function printHoles(holes: HoleResult[]): void {
  if (holes.length === 0) return;
  console.log('');
  console.log('| black hole mid-upload | keepalive | upload failed after s | link torn down after s | outcome |');
  console.log('|---|---|---|---|---|');
  for (const h of holes) {
    const f = (x: number): string => (Number.isNaN(x) ? '—' : x.toFixed(1));
    console.log(
      `| ${h.client} | ${h.keepalive} | ${f(h.detectedS)} | ${f(h.tornDownS)} | ${h.outcome.replaceAll('|', '/')} |`,
    );
  }
}

/** Local ports of established connections to the host's sshd held by process `pid`. */
function sshPortsOfPid(host: TestHost, pid: number): number[] {
  const out = execFileSync(
    'ss',
    ['-tnpH', 'state', 'established', 'dst', host.address, 'dport', '=', `:${host.port}`],
    {
      encoding: 'utf8',
    },
  );
  return out
    .split('\n')
    .filter((l) => l.includes(`pid=${pid},`))
    .map((l) => Number(/\S+:(\d+)\s+\S+:\d+/.exec(l.trim())?.[1]))
    .filter((p) => Number.isInteger(p));
}

function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Size of the prefix uploaded before the black hole goes in. */
const HOLE_AFTER_BYTES = 32 * MiB;

/**
 * The file's bytes in 1 MiB chunks; after HOLE_AFTER_BYTES it calls `reached` and waits for `gate`:
 * the black hole goes in while the upload is certainly under way (the same for every client).
 */
async function* gatedFile(file: string, reached: () => void, gate: Promise<void>): AsyncGenerator<Buffer> {
  let sent = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: MiB })) {
    if (sent >= HOLE_AFTER_BYTES && sent - (chunk as Buffer).length < HOLE_AFTER_BYTES) {
      reached();
      await gate;
    }
    yield chunk as Buffer;
    sent += (chunk as Buffer).length;
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * virsh reads the upload from a FIFO that we feed from the file: 32 MiB, then the black hole, then
 * the rest (our writes simply block once virsh stops reading). Then we wait for virsh to give up,
 * at most `--virsh-timeout-s`.
 */
async function blackholeVirsh(
  ctx: SshBenchContext,
  file: string,
  serverAlive: boolean,
  limitS: number,
): Promise<HoleResult> {
  const { host, virshUri, sshConfig } = ctx;
  const vol = `ep-bench-hole-virsh-${process.pid}.raw`;
  let uri = virshUri;
  const wrapper = join(tmpdir(), `ep-bench-ssh-noalive-${process.pid}`);
  if (!serverAlive) {
    // The same ssh wrapper, with OpenSSH's own keepalive off: only libvirt's keepalive is left.
    writeFileSync(wrapper, `#!/bin/sh\nexec ssh -F '${sshConfig}' -o ServerAliveInterval=0 "$@"\n`, { mode: 0o755 });
    uri = virshUri.replace(/command=[^&]*/, `command=${wrapper}`);
  }
  freshVol(host, vol, ctx.sizeMiB);
  const fifo = join(tmpdir(), `ep-bench-hole-${process.pid}.fifo`);
  rmSync(fifo, { force: true });
  execFileSync('mkfifo', [fifo]);
  const child = spawn('virsh', ['-q', '-c', uri, 'vol-upload', '--pool', host.pool, vol, fifo], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const hard = setTimeout(() => child.kill('SIGKILL'), (limitS + 60) * 1000); // never hang at the FIFO
  const out = createWriteStream(fifo);
  out.on('error', () => undefined); // EPIPE once virsh is gone
  const reached = deferred();
  const gate = deferred();
  const feeding = (async () => {
    for await (const chunk of gatedFile(file, reached.resolve, gate.promise)) {
      if (out.destroyed) return;
      if (!out.write(chunk)) {
        await Promise.race([new Promise<void>((r) => out.once('drain', () => r())), exited]);
        if (child.exitCode !== null || child.signalCode !== null) return;
      }
    }
    out.end();
  })();
  let lift: (() => Promise<void>) | undefined;
  const serverPids: number[] = [];
  try {
    await Promise.race([
      reached.promise,
      exited.then(() => Promise.reject(new Error(`virsh exited early: ${stderr}`))),
    ]);
    await sleep(200); // what is in the FIFO reaches the channel
    const sshPid = childPids(child.pid!).find((p) => readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'ssh');
    const ports = sshPid === undefined ? [] : sshPortsOfPid(host, sshPid);
    for (const port of ports) serverPids.push(...(await sshdPidsFor(host, port)));
    lift = await injectSshFault(host, 'blackhole');
    const t0 = performance.now();
    gate.resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), limitS * 1000);
    const { code, signal } = await exited;
    clearTimeout(timer);
    const secs = (performance.now() - t0) / 1000;
    const killed = signal === 'SIGKILL';
    const last = stderr.trim().split('\n').pop() ?? '';
    return {
      client: 'virsh vol-upload (qemu+ssh)',
      keepalive: serverAlive
        ? "libvirt 5 s × 5 (virsh default); ssh ServerAliveInterval 5 s × 3 (the hosts' ssh_config)"
        : 'libvirt 5 s × 5 (virsh default); ssh ServerAliveInterval off',
      detectedS: killed ? NaN : secs,
      tornDownS: killed ? NaN : secs,
      outcome: killed
        ? `still running after ${limitS} s: killed`
        : `exit ${code ?? `by ${signal}`}: ${last.slice(0, 160) || '(no message)'}`,
    };
  } finally {
    clearTimeout(hard);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    gate.resolve();
    out.destroy();
    await feeding.catch(() => undefined);
    rmSync(fifo, { force: true });
    rmSync(wrapper, { force: true });
    await lift?.();
    signalPids(serverPids, 'SIGKILL');
    await waitGone(serverPids);
    await deleteVolPatiently(host, vol);
  }
}

async function blackholeOurs(
  ctx: SshBenchContext,
  file: string,
  label: string,
  options: HostLinksOptions,
): Promise<HoleResult> {
  const { host } = ctx;
  const vol = `ep-bench-hole-ours-${process.pid}.raw`;
  freshVol(host, vol, ctx.sizeMiB);
  const links = new HostLinks(hostTarget(host), options);
  let lift: (() => Promise<void>) | undefined;
  let serverPids: number[] = [];
  const gate = deferred();
  try {
    const { value: link, port } = await withNewSshPort(host, () => links.dedicated('bulk'));
    serverPids = await sshdPidsFor(host, port);
    const pool = await link.client.storagePoolLookupByName(host.pool);
    const v = await link.client.storageVolLookupByName(pool, vol);
    const reached = deferred();
    const upload = link.client.storageVolUpload(v, gatedFile(file, reached.resolve, gate.promise));
    const outcome = upload.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    await Promise.race([reached.promise, outcome]);
    lift = await injectSshFault(host, 'blackhole');
    const t0 = performance.now();
    gate.resolve();
    const err = await outcome;
    const detected = performance.now();
    const reason = await link.dead;
    const tornDown = performance.now();
    if (err === undefined) {
      return {
        client: label,
        keepalive: '',
        detectedS: NaN,
        tornDownS: NaN,
        outcome: 'finished despite the black hole',
      };
    }
    const code = (err as { code?: unknown }).code;
    const reasonCode = (reason as { code?: unknown }).code;
    return {
      client: label,
      keepalive: describeKeepalive(options),
      detectedS: (detected - t0) / 1000,
      tornDownS: (tornDown - t0) / 1000,
      outcome: `${String(code)} (${errorKind(err)}), link reason ${String(reasonCode)}`,
    };
  } finally {
    gate.resolve();
    await lift?.();
    links.close();
    signalPids(serverPids, 'SIGKILL');
    await waitGone(serverPids);
    await deleteVolPatiently(host, vol);
  }
}

function describeKeepalive(o: HostLinksOptions): string {
  const ssh = `${(o.dial?.keepaliveIntervalMs ?? 5_000) / 1000} s × ${o.dial?.keepaliveCountMax ?? 3}`;
  const ka = o.client?.keepalive;
  const lv = ka === false ? 'off' : `${(ka?.intervalMs ?? 5_000) / 1000} s × ${ka?.countMax ?? 3}`;
  return `ssh ${ssh}; libvirt ${lv}`;
}
