// Where one proxy's create goes: `createProxy` (the createProxyVm activity's work, without
// Temporal) timed call by call on a test host, one proxy after another, beside the virsh floor
// (bench/provision-virsh.sh on the same host: the same steps by virsh over qemu+ssh://) in the
// same run, alternating. The VM is the provisioning bench's: 128 MiB, an empty qcow2 base that
// never boots, a 1 GiB overlay.
//
//   node bench/create-steps.ts [--proxies 10] [--rounds 3] [--no-virsh] [--record FILE]
//
// Each round creates --proxies proxies one at a time through the library (timed), deletes them
// (untimed), then runs the virsh script for as many proxies one at a time (one virsh process per
// step, then all steps in one virsh session). Reports per proxy: our create's wall time, the
// libvirt calls it made (count and median time of each procedure, the time in calls against the
// time outside them) and virsh's per-proxy time; medians (min-max) over the rounds.
//
// Needs (as root): test/hosts/testhost up 2 (uses the first host). Leaves nothing behind.
import { execFile } from 'node:child_process';
import { appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { HostLinks } from '../lib/hostlink/pool.ts';
import type { LibvirtClient } from '../lib/libvirt/client.ts';
import { createProxy } from '../lib/kvm2/proxy/create.ts';
import { deleteProxy } from '../lib/kvm2/proxy/delete.ts';
import { PROJECT_ROOT, uniqueId } from '../test/support/temporal.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import { plantVerifiedBase, removeVerifiedBase } from '../test/support/verified-base.ts';
import { median, spread } from './lib/stats.ts';

const pexec = promisify(execFile);
const { values } = parseArgs({
  options: {
    proxies: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    'no-virsh': { type: 'boolean', default: false },
    record: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  process.stdout.write(
    'node bench/create-steps.ts [--proxies 10] [--rounds 3] [--no-virsh] [--record FILE]\n' +
      "  one proxy's create, call by call, beside bench/provision-virsh.sh one proxy at a time (see the file's head)\n",
  );
  process.exit(0);
}
const count = (name: string, v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new Error(`--${name} must be an integer 1-1000, got ${v}`);
  return n;
};
const P = count('proxies', values.proxies);
const R = count('rounds', values.rounds);
const loadavg = async (): Promise<string> => (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');

interface CallTime {
  proc: string;
  ms: number;
}

/** The client handed to `fn`, with every method call timed into `sink`. */
function timedClient(c: LibvirtClient, sink: CallTime[]): LibvirtClient {
  return new Proxy(c, {
    get(target, key, receiver) {
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof v !== 'function' || typeof key !== 'string') return v;
      return (...args: unknown[]) => {
        const t0 = performance.now();
        const out: unknown = (v as (...a: unknown[]) => unknown).apply(target, args);
        if (out instanceof Promise) {
          return out.finally(() => sink.push({ proc: key, ms: performance.now() - t0 }));
        }
        return out;
      };
    },
  });
}

const host = loadTestHosts()[0];
if (!host) throw new Error('no test hosts: run test/hosts/testhost up 2');
const links = new HostLinks(hostTarget(host));
const calls: CallTime[] = [];
const plain = links.call.bind(links);
links.call = (fn, options) => plain((c, call) => fn(timedClient(c, calls), call), options);

const run = uniqueId('cs')
  .replace(/[^a-z0-9]/g, '')
  .slice(-10);
const entry = `cs${run}`;
const base = await plantVerifiedBase(links, host.pool, entry);
const input = (name: string) => ({
  links,
  ownerUid: `uid-${run}`,
  entry,
  name,
  pool: host.pool,
  network: host.network,
  domainType: host.domainType,
  vcpus: 1,
  memoryMiB: 128,
  diskGiB: 1,
  base: { path: base.path, format: 'qcow2' as const },
  squid: { port: 3128, allowedClientCidrs: ['10.0.0.0/8'] },
  createdAt: new Date().toISOString(),
  reserveBytes: 16 * 1024 * 1024,
});

interface Round {
  round: number;
  loadBefore: string;
  loadAfter: string;
  /** Our create's wall time per proxy, ms. */
  oursMs: number[];
  /** Time inside libvirt calls per proxy, ms (calls may overlap: then this exceeds the wall time). */
  inCallsMs: number[];
  callsPerProxy: number;
  byProc: Record<string, number[]>;
  virshPerProxyMs?: number;
  virshOneSessionPerProxyMs?: number;
}

const virshRun = async (oneSession: boolean): Promise<number> => {
  const env = { ...process.env, EP_TESTHOST_ONLY: host.name };
  const { stdout } = await pexec(
    join(PROJECT_ROOT, 'bench/provision-virsh.sh'),
    [String(P), '1', oneSession ? '1' : '0'],
    { env, timeout: 600_000, maxBuffer: 1 << 20 },
  );
  return (JSON.parse(stdout.trim().split('\n').pop()!) as { perProxyMs: number }).perProxyMs;
};

const rounds: Round[] = [];
try {
  for (let r = 0; r < R; r++) {
    const round: Round = {
      round: r + 1,
      loadBefore: await loadavg(),
      loadAfter: '',
      oursMs: [],
      inCallsMs: [],
      callsPerProxy: 0,
      byProc: {},
    };
    const names: string[] = [];
    for (let i = 0; i < P; i++) {
      const name = `p${r}x${i}`;
      names.push(name);
      calls.length = 0;
      const t0 = performance.now();
      await createProxy(input(name));
      round.oursMs.push(performance.now() - t0);
      round.inCallsMs.push(calls.reduce((s, c) => s + c.ms, 0));
      round.callsPerProxy = calls.length;
      for (const c of calls) (round.byProc[c.proc] ??= []).push(c.ms);
    }
    for (const name of names) await deleteProxy({ ...input(name), logSession: false });
    if (!values['no-virsh']) {
      round.virshPerProxyMs = await virshRun(false);
      round.virshOneSessionPerProxyMs = await virshRun(true);
    }
    round.loadAfter = await loadavg();
    rounds.push(round);
    if (values.record) await appendFile(values.record, `${JSON.stringify(round)}\n`);
    process.stderr.write(
      `round ${r + 1}: ours ${median(round.oursMs).toFixed(0)} ms/proxy` +
        (round.virshPerProxyMs !== undefined
          ? `, virsh ${round.virshPerProxyMs} ms/proxy (one session ${round.virshOneSessionPerProxyMs})`
          : '') +
        `; load ${round.loadBefore} -> ${round.loadAfter}\n`,
    );
  }
} finally {
  await removeVerifiedBase(links, host.pool, base);
  links.close();
}

const fmt = (xs: number[]): string => {
  const s = spread(xs);
  return `${s.med.toFixed(0)} (${s.min.toFixed(0)}-${s.max.toFixed(0)})`;
};
const perRound = (f: (r: Round) => number | undefined): number[] =>
  rounds.map(f).filter((x): x is number => x !== undefined);
const lines = [
  `host ${host.name}, ${P} proxies one at a time, ${R} rounds; ms per proxy, median of the rounds' medians (min-max)`,
  `| measure | ms |`,
  `|---|---|`,
  `| ours: createProxy wall time | ${fmt(perRound((r) => median(r.oursMs)))} |`,
  `| ours: inside libvirt calls | ${fmt(perRound((r) => median(r.inCallsMs)))} |`,
  `| ours: libvirt calls per proxy | ${rounds[0]?.callsPerProxy ?? 0} |`,
];
if (!values['no-virsh']) {
  lines.push(`| virsh: one process per step | ${fmt(perRound((r) => r.virshPerProxyMs))} |`);
  lines.push(`| virsh: one session per proxy | ${fmt(perRound((r) => r.virshOneSessionPerProxyMs))} |`);
  const ratio = median(perRound((r) => median(r.oursMs))) / median(perRound((r) => r.virshOneSessionPerProxyMs));
  lines.push(`| ours / virsh one session (medians) | ${ratio.toFixed(2)} |`);
}
lines.push('', '| procedure | calls per proxy | median ms | total ms per proxy (median round) |', '|---|---|---|---|');
const procs = Object.keys(rounds[0]?.byProc ?? {});
const totals = procs.map((p) => ({
  p,
  per: (rounds[0]!.byProc[p]!.length / P).toFixed(0),
  med: median(rounds.flatMap((r) => r.byProc[p] ?? [])),
  total: median(rounds.map((r) => (r.byProc[p] ?? []).reduce((s, x) => s + x, 0) / P)),
}));
for (const t of totals.sort((a, b) => b.total - a.total)) {
  lines.push(`| ${t.p} | ${t.per} | ${t.med.toFixed(1)} | ${t.total.toFixed(0)} |`);
}
process.stdout.write(`${lines.join('\n')}\n`);
