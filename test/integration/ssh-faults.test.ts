/**
 * Faults injected into a real test host (test/hosts/testhost: sshd and libvirtd in the network
 * namespace ep-h1) while links of lib/hostlink/pool.ts use it: a black hole (every SSH segment dropped
 * both ways, no RST) and a RST mid-upload, the sshd processes of our connections SIGKILLed
 * mid-call, and libvirtd SIGSTOPped mid-call. Each proves that pending calls and streams are
 * rejected as Transient within a bound (the keepalive bound for the black hole, a second or two
 * for a RST or a kill), that the other host (ep-h2) keeps answering meanwhile, and that the host
 * is usable again once the fault is lifted. Bounds on teardown are the feature under test here;
 * they are generous. Every fault is removed in `finally` and again in `after` (restoreHost).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TestContext } from 'node:test';
import { errorKind } from '../../lib/errors.ts';
import { ErrorNumber } from '../../lib/libvirt/constants.ts';
import { LibvirtError } from '../../lib/libvirt/errors.ts';
import type { Link } from '../../lib/hostlink/link.ts';
import { HostLinks } from '../../lib/hostlink/pool.ts';
import type { HostLinksOptions } from '../../lib/hostlink/pool.ts';
import {
  injectSshFault,
  processState,
  restoreHost,
  signalPids,
  sshdPidsFor,
  waitGone,
  withNewSshPort,
} from '../support/host-faults.ts';
import { hostTarget, loadTestHosts, TESTHOST_STATE } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';
import { sleep, within } from '../support/bounded.ts';

const MiB = 1024 * 1024;
const run = `${process.pid}-${Date.now().toString(36)}`;
const KEEPALIVE_MS = 2_000;
const KEEPALIVE_COUNT = 3;
/** Generous bound on black-hole detection: keepalive 2 s × (3 + 1) = 8 s, plus slack for a busy machine. */
const BLACKHOLE_BOUND_MS = 20_000;
/** Bound on rejecting everything after a RST or a kill. */
const PROMPT_BOUND_MS = 2_000;

const OPTIONS: HostLinksOptions = {
  dial: {
    connectTimeoutMs: 2_000,
    readyTimeoutMs: 5_000,
    keepaliveIntervalMs: KEEPALIVE_MS,
    keepaliveCountMax: KEEPALIVE_COUNT,
  },
  client: { keepalive: { intervalMs: KEEPALIVE_MS, countMax: KEEPALIVE_COUNT } },
};

/** The rejection of `p` with the time it took from `since` (fails if `p` resolves). */
async function rejection(p: Promise<unknown>, since: number): Promise<{ err: Error; ms: number }> {
  return p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => {
      assert.ok(e instanceof Error, `rejected with a non-Error: ${String(e)}`);
      return { err: e, ms: performance.now() - since };
    },
  );
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * `totalBytes` in 1 MiB chunks; after `pauseAt` bytes it calls `reached` and waits for `gate`, so
 * that a fault can be injected while the upload is known to be under way.
 */
async function* gatedSource(
  totalBytes: number,
  pauseAt: number,
  reached: () => void,
  gate: Promise<void>,
): AsyncGenerator<Buffer> {
  const chunk = Buffer.alloc(MiB, 0x5a);
  for (let sent = 0; sent < totalBytes; sent += MiB) {
    if (sent === pauseAt) {
      reached();
      await gate;
    }
    yield chunk;
  }
}

function codeOf(err: Error): string {
  const chain: string[] = [];
  let e: unknown = err;
  for (let i = 0; i < 4 && e instanceof Error; i++) {
    const code = (e as { code?: unknown }).code;
    chain.push(typeof code === 'string' ? code : e.name);
    e = e.cause;
  }
  return chain.join(' <- ');
}

function rawVolXml(name: string, capacityBytes: number): string {
  return `<volume><name>${name}</name><capacity unit='bytes'>${capacityBytes}</capacity><allocation>0</allocation><target><format type='raw'/></target></volume>`;
}

const hostsPresent = existsSync(join(TESTHOST_STATE, 'hosts.json'));

describe('SSH links under faults on a real test host', { timeout: 300_000 }, () => {
  const hosts = hostsPresent ? loadTestHosts() : [];
  if (hosts.length < 2) {
    it('needs two test hosts', { skip: `needs 2 hosts in ${TESTHOST_STATE} (test/hosts/testhost up)` }, () => {});
    return;
  }
  const [h1, h2] = hosts as [TestHost, TestHost];
  let h1Links: HostLinks;
  let h2Links: HostLinks;
  /** sshd processes (inside h1) of connections we opened; killed at the end so that nothing lingers. */
  const serverPids = new Set<number>();
  const volumes: string[] = [];
  const links: Link[] = [];

  const hl1 = (): HostLinks => h1Links;
  const hl2 = (): HostLinks => h2Links;

  /** sshd processes of h1's current pooled link. */
  let pooledPids: number[] = [];

  /** A bulk link to h1 and its sshd processes (recorded for the cleanup). */
  async function bulkLink(): Promise<{ link: Link; pids: number[] }> {
    const { value, port } = await withNewSshPort(h1, () => hl1().dedicated('bulk'));
    const pids = await sshdPidsFor(h1, port);
    for (const pid of pids) serverPids.add(pid);
    links.push(value);
    return { link: value, pids };
  }

  /** A call on h1's pooled link; when it dials, the new link's sshd processes are recorded. */
  async function callH1(timeoutMs = 10_000): Promise<void> {
    if (hl1().pooledLink !== undefined) {
      await hl1().call((c, o) => c.getLibVersion(o), { timeoutMs });
      return;
    }
    const { port } = await withNewSshPort(h1, () => hl1().call((c, o) => c.getLibVersion(o), { timeoutMs }));
    pooledPids = await sshdPidsFor(h1, port);
    for (const pid of pooledPids) serverPids.add(pid);
  }

  async function createVolume(label: string, bytes: number): Promise<string> {
    const name = `ep-it-faults-${label}-${run}.raw`;
    await callH1();
    await hl1().call(async (c, o) => {
      const p = await c.storagePoolLookupByName(h1.pool, o);
      await c.storageVolCreateXml(p, rawVolXml(name, bytes), 0, o);
    });
    volumes.push(name);
    return name;
  }

  /** Starts the upload of `totalBytes` into `name` over `link`, pausing at 32 MiB. */
  async function startUpload(link: Link, name: string, totalBytes: number) {
    const reached = deferred();
    const gate = deferred();
    const p = await link.client.storagePoolLookupByName(h1.pool, { timeoutMs: 5_000 });
    const vol = await link.client.storageVolLookupByName(p, name, { timeoutMs: 5_000 });
    const upload = link.client.storageVolUpload(vol, gatedSource(totalBytes, 32 * MiB, reached.resolve, gate.promise), {
      timeoutMs: 10_000,
    });
    upload.catch(() => undefined);
    await within(reached.promise, 30_000, 'upload reaching 32 MiB');
    return { upload, open: gate.resolve };
  }

  /** Short calls to h2 every 100 ms until `stop()`; every one must succeed. Bounded: 600 calls. */
  async function probeOtherHost(stop: () => boolean): Promise<number[]> {
    const latencies: number[] = [];
    for (let i = 0; i < 600 && !stop(); i++) {
      const t0 = performance.now();
      const v = await hl2().call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
      assert.ok(v > 0n);
      latencies.push(performance.now() - t0);
      await sleep(100);
    }
    return latencies;
  }

  /** After a fault: h1 answers again (a fresh pooled link). */
  async function assertRecovered(t: TestContext): Promise<void> {
    const dials = hl1().stats().dials;
    assert.equal(hl1().pooledLink, undefined, 'the pooled link died with the fault');
    const t0 = performance.now();
    await callH1(15_000);
    assert.ok(hl1().stats().dials > dials, 'a new link was dialed');
    t.diagnostic(`${h1.name} answers again after ${Math.round(performance.now() - t0)} ms (new pooled link)`);
  }

  /** Kills what is left of our dead connections on h1 so that their volumes are released. */
  async function reapServerSide(): Promise<void> {
    const pids = [...serverPids];
    signalPids(pids, 'SIGKILL');
    await waitGone(pids, 5_000);
    serverPids.clear();
  }

  before(async () => {
    const done = await restoreHost(h1, hosts.length);
    if (done.length > 0) process.stderr.write(`# ${h1.name} restored before the tests: ${done.join(', ')}\n`);
    h1Links = new HostLinks(hostTarget(h1), OPTIONS);
    h2Links = new HostLinks(hostTarget(h2), OPTIONS);
  });

  after(async () => {
    for (const l of links) l.markDead(new Error('test cleanup'));
    const done = await restoreHost(h1, hosts.length);
    if (done.length > 0) process.stderr.write(`# ${h1.name} restored after the tests: ${done.join(', ')}\n`);
    await reapServerSide();
    // Volumes stay busy until libvirtd sees their upload's connection go: retry, bounded.
    for (const name of volumes) {
      for (let attempt = 0; attempt < 40; attempt++) {
        try {
          await hl1().call(async (c, o) => {
            const p = await c.storagePoolLookupByName(h1.pool, o);
            await c.storageVolDelete(await c.storageVolLookupByName(p, name, o), 0, o);
          });
          break;
        } catch (err) {
          if (err instanceof LibvirtError && err.libvirtCode === ErrorNumber.NO_STORAGE_VOL) break;
          if (attempt === 39) process.stderr.write(`# could not delete ${name}: ${(err as Error).message}\n`);
          await sleep(250);
        }
      }
    }
    h1Links.close();
    h2Links.close();
  });

  it(
    'black hole mid-upload: the upload fails as Transient and the link is torn down within the keepalive bound, while the other host answers at normal latency',
    { timeout: 120_000 },
    async (t) => {
      const vol = await createVolume('blackhole', 256 * MiB);
      await hl2().call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 }); // h2's pooled link is up
      const baseline: number[] = [];
      for (let i = 0; i < 10; i++) {
        const t0 = performance.now();
        await hl2().call((c, o) => c.getLibVersion(o), { timeoutMs: 5_000 });
        baseline.push(performance.now() - t0);
      }
      const { link: bulk } = await bulkLink();
      const { upload, open } = await startUpload(bulk, vol, 256 * MiB);
      const lift = await injectSshFault(h1, 'blackhole');
      try {
        const holeAt = performance.now();
        open();
        let stop = false;
        const probe = probeOtherHost(() => stop);
        // A short call on h1's pooled link meanwhile fails within its own budget.
        const h1Call = rejection(
          hl1().call((c, o) => c.getLibVersion(o), { timeoutMs: 3_000 }),
          performance.now(),
        );
        const failed = await within(rejection(upload, holeAt), BLACKHOLE_BOUND_MS + 5_000, 'upload failure');
        const reason = await within(bulk.dead, 1_000, 'link death');
        const deadMs = performance.now() - holeAt;
        stop = true;
        const latencies = await within(probe, 10_000, 'probe of the other host');
        const short = await within(h1Call, 10_000, 'short call on the black-holed host');

        t.diagnostic(
          `black hole: upload rejected after ${Math.round(failed.ms)} ms (${codeOf(failed.err)}); ` +
            `link dead after ${Math.round(deadMs)} ms (reason ${codeOf(reason)}); keepalive ${KEEPALIVE_MS} ms × ${KEEPALIVE_COUNT}`,
        );
        t.diagnostic(
          `${h1.name} short call: rejected after ${Math.round(short.ms)} ms (${codeOf(short.err)}); ` +
            `${h2.name} meanwhile: ${latencies.length} calls, max ${Math.max(...latencies).toFixed(1)} ms, ` +
            `baseline max ${Math.max(...baseline).toFixed(1)} ms`,
        );
        assert.equal(errorKind(failed.err), 'Transient', String(failed.err));
        assert.equal(errorKind(reason), 'Transient', String(reason));
        assert.ok(failed.ms <= BLACKHOLE_BOUND_MS, `upload failed only after ${failed.ms} ms`);
        assert.ok(deadMs <= BLACKHOLE_BOUND_MS, `link torn down only after ${deadMs} ms`);
        assert.ok(failed.ms >= KEEPALIVE_MS, `failed after ${failed.ms} ms: too early for a keepalive verdict`);
        assert.equal(errorKind(short.err), 'Transient', String(short.err));
        assert.ok(short.ms < 3_000 + 1_500, `h1 short call rejected after ${short.ms} ms`);
        assert.ok(latencies.length >= 10, `only ${latencies.length} calls to ${h2.name}`);
        // Generous: every call to the other host answered, none anywhere near the fault's timescale.
        assert.ok(Math.max(...latencies) < 1_000, `a call to ${h2.name} took ${Math.max(...latencies)} ms`);
      } finally {
        await lift();
      }
      await assertRecovered(t);
    },
  );

  it(
    'RST mid-upload: the upload and every pending call on the host are rejected as Transient within 2 s',
    { timeout: 60_000 },
    async (t) => {
      const vol = await createVolume('reset', 256 * MiB);
      const { link: bulk } = await bulkLink();
      const { upload, open } = await startUpload(bulk, vol, 256 * MiB);
      const lift = await injectSshFault(h1, 'reset');
      try {
        const t0 = performance.now();
        open();
        const calls = Array.from({ length: 3 }, () =>
          rejection(
            hl1().call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 }),
            t0,
          ),
        );
        const all = await within(Promise.all([rejection(upload, t0), ...calls]), 10_000, 'rejections');
        await within(bulk.dead, 1_000, 'link death');
        t.diagnostic(
          `RST: upload rejected after ${Math.round(all[0].ms)} ms (${codeOf(all[0].err)}); pending calls after ` +
            `${all
              .slice(1)
              .map((r) => Math.round(r.ms))
              .join(', ')} ms (${codeOf(all[1]!.err)})`,
        );
        for (const { err, ms } of all) {
          assert.equal(errorKind(err), 'Transient', String(err));
          assert.ok(ms <= PROMPT_BOUND_MS, `rejected after ${ms} ms: ${String(err)}`);
        }
      } finally {
        await lift();
      }
      await reapServerSide();
      await assertRecovered(t);
    },
  );

  it(
    'sshd of our connections SIGKILLed mid-call: the upload and the pending calls are rejected as Transient within 2 s',
    { timeout: 60_000 },
    async (t) => {
      const vol = await createVolume('sshd-kill', 256 * MiB);
      const { link: bulk, pids: bulkPids } = await bulkLink();
      assert.ok(pooledPids.length > 0 && bulkPids.length > 0, 'sshd processes of both connections found');
      const { upload, open } = await startUpload(bulk, vol, 256 * MiB);
      open();
      await sleep(200); // the upload is streaming again
      // Stop the pooled connection's sshd so that these calls are certainly pending when it dies.
      signalPids(pooledPids, 'SIGSTOP');
      const calls = Array.from({ length: 3 }, () => hl1().call((c, o) => c.getLibVersion(o), { timeoutMs: 10_000 }));
      for (const c of calls) c.catch(() => undefined);
      await sleep(200);
      assert.equal(hl1().pooledLink?.client.connection.pendingCalls, 3, 'three calls pending');
      const t0 = performance.now();
      signalPids([...pooledPids, ...bulkPids], 'SIGKILL');
      const all = await within(Promise.all([upload, ...calls].map((p) => rejection(p, t0))), 10_000, 'rejections');
      t.diagnostic(
        `sshd killed: upload rejected after ${Math.round(all[0]!.ms)} ms (${codeOf(all[0]!.err)}); pending calls after ` +
          `${all
            .slice(1)
            .map((r) => Math.round(r.ms))
            .join(', ')} ms (${codeOf(all[1]!.err)})`,
      );
      for (const { err, ms } of all) {
        assert.equal(errorKind(err), 'Transient', String(err));
        assert.ok(ms <= PROMPT_BOUND_MS, `rejected after ${ms} ms: ${String(err)}`);
      }
      assert.deepEqual(await waitGone([...pooledPids, ...bulkPids]), []);
      await assertRecovered(t);
    },
  );

  it(
    'libvirtd SIGSTOPped mid-call: calls fail by their budget, the upload by libvirt keepalive, all Transient; the host recovers on SIGCONT',
    { timeout: 90_000 },
    async (t) => {
      const libvirtd = (h1.pids as { libvirtd: number }).libvirtd;
      const vol = await createVolume('libvirtd-stop', 256 * MiB);
      const { link: bulk } = await bulkLink();
      const { upload, open } = await startUpload(bulk, vol, 256 * MiB);
      signalPids([libvirtd], 'SIGSTOP');
      try {
        // The stop lands when the kernel next schedules the process: wait for it, boundedly.
        for (let i = 0; i < 100 && processState(libvirtd) !== 'T'; i++) await new Promise((r) => setTimeout(r, 10));
        assert.equal(processState(libvirtd), 'T', 'libvirtd is stopped');
        const t0 = performance.now();
        open();
        const budgetMs = 2_000;
        const calls = Array.from({ length: 3 }, () =>
          rejection(
            hl1().call((c, o) => c.getLibVersion(o), { timeoutMs: budgetMs }),
            t0,
          ),
        );
        const callResults = await within(Promise.all(calls), budgetMs + 5_000, 'call rejections');
        const up = await within(rejection(upload, t0), BLACKHOLE_BOUND_MS + 5_000, 'upload rejection');
        const reason = await within(bulk.dead, 1_000, 'link death');
        t.diagnostic(
          `libvirtd stopped: calls rejected after ${callResults.map((r) => Math.round(r.ms)).join(', ')} ms ` +
            `(${callResults.map((r) => codeOf(r.err)).join('; ')}); upload after ${Math.round(up.ms)} ms (${codeOf(up.err)}), ` +
            `link reason ${codeOf(reason)}`,
        );
        for (const { err, ms } of callResults) {
          assert.equal(errorKind(err), 'Transient', String(err));
          assert.ok(ms <= budgetMs + 1_000, `call rejected after ${ms} ms`);
        }
        assert.equal(errorKind(up.err), 'Transient', String(up.err));
        assert.ok(up.ms <= BLACKHOLE_BOUND_MS, `upload rejected after ${up.ms} ms`);
      } finally {
        signalPids([libvirtd], 'SIGCONT');
      }
      assert.notEqual(processState(libvirtd), 'T');
      await assertRecovered(t);
    },
  );
});
