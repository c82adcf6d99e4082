/**
 * Benchmark: upload the same file into a test host's storage pool over SSH, in one run,
 * alternating, several rounds:
 *
 * - ours: a `dedicated('bulk')` link (lib/ssh) in a child process per upload
 *   (bench/upload-ssh-once.ts), so its RSS and CPU are its own; one row per chunk size × cipher;
 * - the anchor: `virsh -c <descriptor.virshUri> vol-upload` (qemu+ssh through the OpenSSH client,
 *   its default cipher);
 * - the ceiling: `cat FILE | ssh -F <sshConfigPath> <host> 'cat >/dev/null'`, with OpenSSH's
 *   default cipher and with `-c aes128-gcm@openssh.com`.
 *
 * Each round rotates the order of the variants (on this machine an upload's speed depends on which
 * one ran before it). Reports median seconds, MB/s, ours/virsh and ours/ceiling(aes128-gcm) time ratios, our RSS growth
 * (peak minus idle) and client-side CPU seconds (ours: the child's process.cpuUsage over dial to
 * confirmed finish; virsh and the pipes: user+system of the command and its children, from GNU
 * time). With `--blackhole`, it also black-holes the host's SSH port mid-upload (every segment
 * dropped both ways, no RST) for virsh and for ours, and reports when each noticed and gave up;
 * virsh gets a hard timeout so that the bench always ends.
 *
 *   node bench/upload-ssh.ts [--size-mib 400] [--rounds 5] [--host 0] [--chunks 1048576]
 *       [--ciphers aes128-gcm@openssh.com] [--read-bytes 1048576] [--blackhole] [--blackhole-only]
 *       [--virsh-timeout-s 90] [--max-load 1.0] [--json out.json]
 *
 * Needs `test/hosts/testhost up`, root (nsenter, iptables in the host's namespace). Not a test: it
 * asserts nothing and prints tables. The black hole disturbs every SSH user of that host for up to
 * `--virsh-timeout-s`; run it when nothing else uses the host.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { errorKind } from '../lib/errors.ts';
import { HostLinks } from '../lib/ssh/pool.ts';
import type { HostLinksOptions } from '../lib/ssh/pool.ts';
import {
  clearFaultRules,
  injectSshFault,
  signalPids,
  sshdPidsFor,
  waitGone,
  withNewSshPort,
} from '../test/support/host-faults.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import type { TestHost } from '../test/support/testhosts.ts';

const { values } = parseArgs({
  options: {
    'size-mib': { type: 'string', default: '400' },
    rounds: { type: 'string', default: '5' },
    host: { type: 'string', default: '0' },
    chunks: { type: 'string', default: String(1024 * 1024) },
    ciphers: { type: 'string', default: 'aes128-gcm@openssh.com' },
    'read-bytes': { type: 'string', default: String(1024 * 1024) },
    blackhole: { type: 'boolean', default: false },
    'blackhole-only': { type: 'boolean', default: false },
    'virsh-timeout-s': { type: 'string', default: '90' },
    'max-load': { type: 'string', default: '1.0' },
    json: { type: 'string' },
  },
});
const MiB = 1024 * 1024;
const sizeMiB = Number(values['size-mib']);
const rounds = Number(values.rounds);
const chunks = values.chunks.split(',').map(Number);
const ciphers = values.ciphers.split(',');
const hostIndex = Number(values.host);
const host: TestHost = loadTestHosts()[hostIndex]!;
const here = new URL('.', import.meta.url).pathname;
const virshUri = String(host.virshUri);
const sshConfig = String(host.sshConfigPath);
const GCM = 'aes128-gcm@openssh.com';

function sh(argv: string[], timeoutMs = 600_000): { stdout: string; stderr: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', maxBuffer: 64 * MiB, timeout: timeoutMs });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}
const inHost = (...args: string[]): string[] => ['nsenter', '-t', String(host.holderPid), '-m', '-n', '--', ...args];

function deleteVol(name: string): void {
  const argv = inHost('virsh', '-q', 'vol-delete', '--pool', host.pool, name);
  spawnSync(argv[0]!, argv.slice(1), { timeout: 30_000 });
}
function freshVol(name: string): void {
  deleteVol(name);
  sh(inHost('virsh', '-q', 'vol-create-as', host.pool, name, `${sizeMiB}M`, '--format', 'raw'));
}
/** Deletes a volume that a dead upload may still hold (libvirtd releases it when the client goes). */
async function deleteVolPatiently(name: string): Promise<void> {
  for (let i = 0; i < 60; i++) {
    const argv = inHost('virsh', '-q', 'vol-delete', '--pool', host.pool, name);
    const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 30_000 });
    if (r.status === 0 || /not found|no storage vol/i.test(r.stderr)) return;
    await sleep(500);
  }
  console.error(`# could not delete ${name}`);
}

async function makeFile(): Promise<string> {
  const path = join(tmpdir(), `ep-bench-ssh-${sizeMiB}m.bin`);
  const out = createWriteStream(path);
  for (let i = 0; i < sizeMiB; i++) {
    if (!out.write(randomBytes(MiB))) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r) => out.end(r));
  return path;
}

function median(xs: number[]): number {
  const s = [...xs].filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Runs `argv` under GNU time; returns wall seconds and user+system CPU seconds (children included). */
function timed(argv: string[]): { secs: number; cpu: number; maxRssKiB: number } {
  const t0 = performance.now();
  const r = spawnSync('/usr/bin/time', ['-f', 'EPTIME %U %S %M', ...argv], {
    encoding: 'utf8',
    maxBuffer: 64 * MiB,
    timeout: 600_000,
  });
  const secs = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr}`);
  const m = /EPTIME ([\d.]+) ([\d.]+) (\d+)/.exec(r.stderr);
  return { secs, cpu: m ? Number(m[1]) + Number(m[2]) : NaN, maxRssKiB: m ? Number(m[3]) : NaN };
}

interface Row {
  secs: number[];
  growth: number[];
  cpu: number[];
  note?: string;
}
const results: Record<string, Row> = {};
const record = (key: string, secs: number, cpu: number, growth = NaN, note?: string): void => {
  const row = (results[key] ??= { secs: [], growth: [], cpu: [] });
  row.secs.push(secs);
  row.cpu.push(cpu);
  row.growth.push(growth);
  if (note !== undefined) row.note = note;
};

/** Waits (at most 5 minutes) for the 1-minute load average to drop below `max`. */
async function waitForQuiet(max: number): Promise<void> {
  for (let i = 0; i < 60 && loadavg()[0]! > max; i++) {
    if (i === 0) console.error(`# load ${loadavg()[0]!.toFixed(2)} > ${max}: waiting (at most 5 min)`);
    await sleep(5_000);
  }
}

const oursKey = (chunk: number, cipher: string): string => `ours, chunk ${chunk / 1024} KiB, ${cipher}`;
const VIRSH = 'virsh vol-upload (qemu+ssh, OpenSSH default cipher)';
const PIPE_DEFAULT = "ceiling: cat | ssh 'cat >/dev/null' (default cipher)";
const PIPE_GCM = `ceiling: cat | ssh -c ${GCM} 'cat >/dev/null'`;

function throughput(file: string): void {
  const vol = `ep-bench-ssh-${process.pid}.raw`;
  const ours = (chunk: number, cipher: string) => (): void => {
    freshVol(vol);
    const { stdout } = sh([
      process.execPath,
      join(here, 'upload-ssh-once.ts'),
      '--host',
      String(hostIndex),
      '--vol',
      vol,
      '--file',
      file,
      '--chunk',
      String(chunk),
      '--read-bytes',
      values['read-bytes'],
      '--cipher',
      cipher,
    ]);
    const r = JSON.parse(stdout) as {
      seconds: number;
      idleRss: number;
      peakRss: number;
      cpuUserS: number;
      cpuSystemS: number;
      cipher: string;
    };
    if (r.cipher !== cipher) throw new Error(`negotiated ${r.cipher}, asked for ${cipher}`);
    record(oursKey(chunk, cipher), r.seconds, r.cpuUserS + r.cpuSystemS, r.peakRss - r.idleRss);
  };
  const pipe = (key: string, cipherArg: string) => (): void => {
    const p = timed([
      'bash',
      '-c',
      `cat "$1" | ssh -F "$2" ${cipherArg} "$3" 'cat >/dev/null'`,
      '_',
      file,
      sshConfig,
      host.name,
    ]);
    record(key, p.secs, p.cpu);
  };
  const jobs: (() => void)[] = [
    ...ciphers.flatMap((cipher) => chunks.map((chunk) => ours(chunk, cipher))),
    () => {
      freshVol(vol);
      const v = timed(['virsh', '-q', '-c', virshUri, 'vol-upload', '--pool', host.pool, vol, file]);
      record(VIRSH, v.secs, v.cpu);
    },
    pipe(PIPE_DEFAULT, ''),
    pipe(PIPE_GCM, `-c ${GCM}`),
  ];
  try {
    for (let round = 0; round < rounds; round++) {
      // Each round starts one job later, so that no variant always runs right after the same other.
      for (let i = 0; i < jobs.length; i++) jobs[(i + round) % jobs.length]!();
      console.error(`# round ${round + 1}/${rounds} done (load ${loadavg()[0]!.toFixed(2)})`);
    }
  } finally {
    deleteVol(vol);
  }
}

/** Local ports of established connections to the host's sshd held by process `pid`. */
function sshPortsOfPid(pid: number): number[] {
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

interface HoleResult {
  client: string;
  keepalive: string;
  detectedS: number;
  tornDownS: number;
  outcome: string;
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
async function blackholeVirsh(file: string, serverAlive: boolean): Promise<HoleResult> {
  const vol = `ep-bench-hole-virsh-${process.pid}.raw`;
  let uri = virshUri;
  const wrapper = join(tmpdir(), `ep-bench-ssh-noalive-${process.pid}`);
  if (!serverAlive) {
    // The same ssh wrapper, with OpenSSH's own keepalive off: only libvirt's keepalive is left.
    writeFileSync(wrapper, `#!/bin/sh\nexec ssh -F '${sshConfig}' -o ServerAliveInterval=0 "$@"\n`, { mode: 0o755 });
    uri = virshUri.replace(/command=[^&]*/, `command=${wrapper}`);
  }
  freshVol(vol);
  const limitS = Number(values['virsh-timeout-s']);
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
    const ports = sshPid === undefined ? [] : sshPortsOfPid(sshPid);
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
    await deleteVolPatiently(vol);
  }
}

async function blackholeOurs(file: string, label: string, options: HostLinksOptions): Promise<HoleResult> {
  const vol = `ep-bench-hole-ours-${process.pid}.raw`;
  freshVol(vol);
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
    await deleteVolPatiently(vol);
  }
}

function describeKeepalive(o: HostLinksOptions): string {
  const ssh = `${(o.dial?.keepaliveIntervalMs ?? 5_000) / 1000} s × ${o.dial?.keepaliveCountMax ?? 3}`;
  const ka = o.client?.keepalive;
  const lv = ka === false ? 'off' : `${(ka?.intervalMs ?? 5_000) / 1000} s × ${ka?.countMax ?? 3}`;
  return `ssh ${ssh}; libvirt ${lv}`;
}

// ---------------------------------------------------------------------------------------------
const maxLoad = Number(values['max-load']);
await waitForQuiet(maxLoad);
const loadBefore = loadavg();
const file = await makeFile();
const holes: HoleResult[] = [];
const started = new Date().toISOString();
try {
  await clearFaultRules(host);
  if (!values['blackhole-only']) throughput(file);
  if (values.blackhole || values['blackhole-only']) {
    await waitForQuiet(maxLoad);
    holes.push(await blackholeOurs(file, 'ours (defaults)', {}));
    holes.push(
      await blackholeOurs(file, 'ours (keepalive 2 s × 3)', {
        dial: { keepaliveIntervalMs: 2_000, keepaliveCountMax: 3 },
        client: { keepalive: { intervalMs: 2_000, countMax: 3 } },
      }),
    );
    holes.push(await blackholeVirsh(file, true));
    holes.push(await blackholeVirsh(file, false));
  }
} finally {
  await clearFaultRules(host);
  rmSync(file, { force: true });
}
const loadAfter = loadavg();

const fmtLoad = (l: number[]): string => l.map((x) => x.toFixed(2)).join(' / ');
console.log(
  `upload of ${sizeMiB} MiB to ${host.name} over SSH, ${rounds} rounds, alternating; node ${process.version}, ` +
    `${cpus().length} CPUs, load (1/5/15 min) before ${fmtLoad(loadBefore)}, after ${fmtLoad(loadAfter)}; started ${started}`,
);
if (Object.keys(results).length > 0) {
  const virshMedian = median(results[VIRSH]!.secs);
  const gcmMedian = median(results[PIPE_GCM]!.secs);
  console.log('');
  console.log(
    '| client | median s | MB/s | ours/virsh | ours/ceiling (aes128-gcm) | RSS growth, median MiB | CPU s, median |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const [key, r] of Object.entries(results)) {
    const m = median(r.secs);
    const ours = key.startsWith('ours');
    const growth = r.growth.every(Number.isNaN) ? '—' : (median(r.growth) / MiB).toFixed(1);
    console.log(
      `| ${key.replaceAll('|', '\\|')} | ${m.toFixed(3)} | ${((sizeMiB * MiB) / 1e6 / m).toFixed(0)} | ${ours ? (m / virshMedian).toFixed(2) : '—'} | ` +
        `${ours ? (m / gcmMedian).toFixed(2) : '—'} | ${growth} | ${median(r.cpu).toFixed(2)} |`,
    );
  }
}
if (holes.length > 0) {
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
if (values.json !== undefined) {
  writeFileSync(
    values.json,
    JSON.stringify({ started, loadBefore, loadAfter, sizeMiB, rounds, results, holes }, null, 2),
  );
}
