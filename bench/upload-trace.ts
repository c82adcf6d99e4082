/**
 * Diagnostic: one upload by our client over SSH (as bench/upload-ssh-once.ts) with a timeline
 * sampled every `--sample-ms`: bytes handed to the transport, the SSH channel's send window, the
 * TCP socket's queued bytes, and event-loop utilisation. Prints phase times (dial, stream open,
 * last byte handed over, finish confirmed) and where the time went: waiting for SSH window
 * (window 0), waiting on TCP (bytes queued in the socket), or neither (our loop or the source).
 *
 *   node bench/upload-trace.ts --vol NAME --file PATH [--host 0] [--chunk BYTES] [--read-bytes BYTES]
 *       [--sample-ms 10] [--timeline out.tsv] [--stock-ssh2] [--local] [--pin-self CPUS] [--pin-sshd CPUS]
 *
 * With `--local` it uploads over the host's unix socket instead (no SSH window; the queue is the
 * unix socket's). `--pin-self` and `--pin-sshd` set the CPU affinity (taskset) of this process and
 * of this connection's sshd processes on the host (only those: never the listener or libvirtd).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { LibvirtClient } from '../lib/libvirt/client.ts';
import { dialSsh } from '../lib/ssh/dial.ts';
import { DEFAULT_LIBVIRT_SOCKET } from '../lib/rules.ts';
import type { SshSession } from '../lib/ssh/session.ts';
import type { Duplex } from 'node:stream';
import { sshdPidsFor } from '../test/support/host-faults.ts';
import { connectLocalSocket, hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import { UPLOAD_OPTIONS, uploadInput } from './lib/upload-child.ts';

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '0' },
    ...UPLOAD_OPTIONS,
    'sample-ms': { type: 'string', default: '10' },
    timeline: { type: 'string' },
    'stock-ssh2': { type: 'boolean', default: false },
    local: { type: 'boolean', default: false },
    'pin-self': { type: 'string' },
    'pin-sshd': { type: 'string' },
  },
});
const h = loadTestHosts()[Number(values.host)]!;
const target = hostTarget(h);
const t0 = performance.now();
const ms = (): number => performance.now() - t0;
let session: SshSession | undefined;
let duplex: Duplex;
if (values.local) {
  duplex = await connectLocalSocket(h);
} else {
  session = await dialSsh(target, {
    ciphers: ['aes128-gcm@openssh.com'],
    stockSsh2Writes: values['stock-ssh2'],
  });
  duplex = await session.openStreamLocal(target.socketPath ?? DEFAULT_LIBVIRT_SOCKET);
}
const client = await LibvirtClient.connect(duplex, { label: 'trace' });
// The sshd processes of this connection only (never the listener), for their CPU time and pinning.
const sshdPids =
  session === undefined
    ? []
    : await sshdPidsFor(
        h,
        (duplex as unknown as { _client: { _sock: { localPort: number } } })._client._sock.localPort,
      );
if (values['pin-self'] !== undefined) execFileSync('taskset', ['-a', '-pc', values['pin-self'], String(process.pid)]);
if (values['pin-sshd'] !== undefined) {
  for (const pid of sshdPids) execFileSync('taskset', ['-a', '-pc', values['pin-sshd'], String(pid)]);
}
/** User+system CPU seconds of `pid` so far (from /proc). */
const cpuOfPid = (pid: number): number => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return NaN;
  }
};
const sshdCpu0 = sshdPids.reduce((a, p) => a + cpuOfPid(p), 0);
const tDial = ms();
const pool = await client.storagePoolLookupByName(h.pool);
const vol = await client.storageVolLookupByName(pool, values.vol!);
// ssh2 internals, read only: the channel's send window and the TCP socket's queue. Locally there
// is no window, and the queue is the unix socket's.
const channel = duplex as unknown as {
  outgoing?: { window: number };
  _client?: { _sock: { writableLength: number } };
  writableLength: number;
};
const window = (): number => channel.outgoing?.window ?? 1;
const sock = channel._client?._sock ?? channel;
let bytes = 0;
const rows: string[] = [];
let elu0 = performance.eventLoopUtilization();
let windowZero = 0;
let tcpQueued = 0;
let neither = 0;
let samples = 0;
let tFirst = 0;
const sampleMs = Number(values['sample-ms']);
const sampler = setInterval(() => {
  const elu = performance.eventLoopUtilization(elu0);
  elu0 = performance.eventLoopUtilization();
  const w = window();
  const q = sock.writableLength;
  if (bytes > 0) {
    samples++;
    if (w === 0) windowZero++;
    else if (q > 0) tcpQueued++;
    else neither++;
  }
  rows.push(`${ms().toFixed(1)}\t${bytes}\t${w}\t${q}\t${elu.utilization.toFixed(2)}`);
}, sampleMs);
let gcCount = 0;
new PerformanceObserver((list) => (gcCount += list.getEntries().length)).observe({ entryTypes: ['gc'] });
const cpu0 = process.cpuUsage();
const size = statSync(values.file!).size;
let tLast = 0;
const tOpen0 = ms();
const { chunks, chunkBytes } = uploadInput(values);
await client.storageVolUpload(vol, chunks, {
  chunkBytes,
  onProgress: (p) => {
    if (bytes === 0) tFirst = ms();
    bytes = p.bytes;
    if (bytes === size) tLast = ms();
  },
});
const tDone = ms();
const sshdCpuS = sshdPids.reduce((a, p) => a + cpuOfPid(p), 0) - sshdCpu0;
clearInterval(sampler);
const cpu = process.cpuUsage(cpu0);
await client.close();
session?.kill(new Error('done'));
if (values.timeline) writeFileSync(values.timeline, 'ms\tbytes\twindow\ttcp_queued\telu\n' + rows.join('\n') + '\n');
const pct = (n: number): string => `${((100 * n) / Math.max(1, samples)).toFixed(0)}%`;
console.log(
  JSON.stringify({
    dialMs: +tDial.toFixed(0),
    openToFirstByteMs: +(tFirst - tOpen0).toFixed(0),
    sendMs: +(tLast - tFirst).toFixed(0),
    lastByteToConfirmMs: +(tDone - tLast).toFixed(0),
    totalMs: +tDone.toFixed(0),
    cpuS: +((cpu.user + cpu.system) / 1e6).toFixed(2),
    sshdCpuS: +sshdCpuS.toFixed(2),
    windowZero: pct(windowZero),
    tcpQueued: pct(tcpQueued),
    neither: pct(neither),
    packetPool: session?.packetPool?.stats,
    gc: gcCount,
  }),
);
