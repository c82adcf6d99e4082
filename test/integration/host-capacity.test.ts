/**
 * Host capacity against the real test hosts' libvirtd: the surveyHosts activity (over SSH, as the
 * worker runs it) reports each host's memory, CPUs and what the running domains take of them, and
 * those figures are the ones virsh shows on the host itself (`nodeinfo`, `nodememstats`,
 * `freecell`, `dominfo` of every running domain). A domain that is not ours (no mark, and
 * transient: started by `virsh create`, without persistent config) leaves the host reachable and
 * counts toward committed memory and vCPUs. Placement over that real survey refuses a VM larger than
 * any host, naming each host, and places one that fits.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { HostRegistry } from '../../activities/hosts.ts';
import { createProxyActivities } from '../../activities/proxy.ts';
import type { HostSurvey } from '../../contracts/fleet.ts';
import { pickHost } from '../../workflows/proxy/placement.ts';
import { fleetConfig } from '../support/fleet.ts';
import { loadTestHosts, virsh } from '../support/testhosts.ts';
import type { TestHost } from '../support/testhosts.ts';

const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const entry = `hc${run}`.slice(0, 30);
/** The domain nobody of ours owns: 96 MiB, 3 vCPUs, no disk (SeaBIOS finds nothing to boot and idles). */
const OTHER = { name: `ep-hc-other-${run}`, memoryMiB: 96, vcpus: 3 };
/** How far free memory may move beyond the virsh readings taken just before and after the survey, in MiB. */
const FREE_SLACK_MIB = 64;

/** `Label:   123 KiB` lines of virsh output as numbers, by label. */
function fields(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s*([^:]+?)\s*:\s*(\d+)/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

function need(map: Map<string, number>, key: string): number {
  const v = map.get(key);
  assert.ok(v !== undefined, `virsh printed no "${key}" (got ${[...map.keys()].join(', ')})`);
  return v;
}

/** free + buffers + cached of `virsh nodememstats`, in KiB. */
async function memstatsFreeKiB(host: TestHost): Promise<number> {
  const m = fields(await virsh(host, 'nodememstats'));
  return need(m, 'free') + need(m, 'buffers') + need(m, 'cached');
}

/** Max memory (KiB) and vCPUs summed over the running domains, from `virsh dominfo` of each. */
async function committed(host: TestHost): Promise<{ kib: number; vcpus: number; names: string[] }> {
  const names = (await virsh(host, 'list', '--name')).split('\n').filter((n) => n.trim() !== '');
  let kib = 0;
  let vcpus = 0;
  for (const name of names) {
    const info = fields(await virsh(host, 'dominfo', name));
    kib += need(info, 'Max memory');
    vcpus += need(info, 'CPU(s)');
  }
  return { kib, vcpus, names };
}

describe('host capacity from libvirt, against virsh on the test hosts', { timeout: 180_000 }, () => {
  let hosts: TestHost[];
  let registry: HostRegistry;
  let survey: (input: { entry: string }) => Promise<HostSurvey[]>;
  const xmlPath = `/tmp/${OTHER.name}.xml`;

  before(async () => {
    hosts = loadTestHosts().slice(0, 2);
    assert.equal(hosts.length, 2, 'two test hosts (test/hosts/testhost up 2)');
    const config = fleetConfig({
      entry,
      ownerUid: `uid-${run}`,
      hosts,
      images: { empty: { url: 'http://127.0.0.1:9/empty.qcow2' } },
    });
    const first = config.providers[0]!.hosts[0]!;
    first.maxProxies = 7;
    first.memoryOvercommit = 1.5;
    registry = new HostRegistry(config);
    const activities = createProxyActivities(registry);
    survey = (input) => activities.surveyHosts(input);
    // /tmp is the machine's in every test host's mount namespace.
    writeFileSync(
      xmlPath,
      `<domain type='${hosts[0]!.domainType}'><name>${OTHER.name}</name>` +
        `<memory unit='MiB'>${OTHER.memoryMiB}</memory><vcpu>${OTHER.vcpus}</vcpu>` +
        `<os><type arch='x86_64'>hvm</type></os><devices/></domain>`,
    );
    await virsh(hosts[0]!, 'create', xmlPath);
  });
  after(async () => {
    if (hosts?.[0]) await virsh(hosts[0], 'destroy', OTHER.name).catch(() => undefined);
    rmSync(xmlPath, { force: true });
    registry?.close();
  });

  it('memory, CPUs and committed figures are the ones virsh shows; the limits come from the providers file', async () => {
    const before = await Promise.all(hosts.map(memstatsFreeKiB));
    const result = await survey({ entry });
    const afterKiB = await Promise.all(hosts.map(memstatsFreeKiB));
    assert.equal(result.length, 2);
    for (const [i, host] of hosts.entries()) {
      const s = result.find((r) => r.host === host.name);
      assert.ok(s, `no survey of ${host.name}`);
      assert.equal(s.reachable, true, `${host.name}: ${s.error}`);
      const node = fields(await virsh(host, 'nodeinfo'));
      const memstats = fields(await virsh(host, 'nodememstats'));
      assert.equal(s.memoryTotalMiB, Math.floor(need(memstats, 'total') / 1024), `${host.name}: nodememstats total`);
      assert.ok(s.memoryFreeMiB! <= s.memoryTotalMiB, `${host.name}: free within the total`);
      assert.equal(s.cpus, need(node, 'CPU(s)'), `${host.name}: nodeinfo CPUs`);

      const lo = Math.floor(Math.min(before[i]!, afterKiB[i]!) / 1024) - FREE_SLACK_MIB;
      const hi = Math.floor(Math.max(before[i]!, afterKiB[i]!) / 1024) + FREE_SLACK_MIB;
      assert.ok(
        s.memoryFreeMiB! >= lo && s.memoryFreeMiB! <= hi,
        `${host.name}: free ${s.memoryFreeMiB} MiB outside nodememstats free+buffers+cached [${lo}, ${hi}] MiB`,
      );
      // freecell is MemFree alone (per NUMA cell): never more than free + buffers + cache.
      const freecell = need(fields(await virsh(host, 'freecell')), 'Total');
      assert.ok(
        s.memoryFreeMiB! + FREE_SLACK_MIB >= Math.floor(freecell / 1024),
        `${host.name}: freecell ${freecell} KiB`,
      );

      const c = await committed(host);
      assert.equal(s.memoryCommittedMiB, Math.floor(c.kib / 1024), `${host.name}: dominfo of ${c.names.join(', ')}`);
      assert.equal(s.vcpusCommitted, c.vcpus, `${host.name}: vCPUs of ${c.names.join(', ')}`);
      assert.equal(s.proxies, 0, 'no proxies of this run’s entry');
      assert.equal(s.cpuOvercommit, 4);
    }
    const [h1, h2] = hosts.map((h) => result.find((r) => r.host === h.name)!);
    // The unmarked domain on the first host is counted: others' VMs take memory too.
    const other = fields(await virsh(hosts[0]!, 'dominfo', OTHER.name));
    assert.equal(need(other, 'Max memory'), OTHER.memoryMiB * 1024);
    assert.ok(h1!.memoryCommittedMiB! >= OTHER.memoryMiB && h1!.vcpusCommitted! >= OTHER.vcpus);
    assert.deepEqual([h1!.maxProxies, h1!.memoryOvercommit], [7, 1.5]);
    assert.deepEqual([h2!.maxProxies, h2!.memoryOvercommit], [undefined, 1]);
    assert.ok(!('maxProxies' in h2!));
  });

  it('placement over the real survey: a VM larger than any host waits with each host named; a small one is placed', async () => {
    const result = await survey({ entry });
    for (const s of result) assert.equal(s.reachable, true, `${s.host}: ${s.error}`);
    const most = Math.max(...result.map((s) => s.memoryTotalMiB! * s.memoryOvercommit!));
    const huge = pickHost(result, 'p-huge', { memoryMiB: Math.ceil(most) + 1, vcpus: 1 });
    assert.equal(huge.host, undefined);
    assert.ok(huge.host === undefined && huge.capacity);
    for (const h of hosts) assert.match(huge.reason, new RegExp(`${h.name}: memory: \\d+ of \\d+ MiB committed`));
    const small = pickHost(result, 'p-small', { memoryMiB: 64, vcpus: 1 });
    assert.ok(
      hosts.some((h) => h.name === small.host),
      `a 64 MiB VM is placed: ${'reason' in small ? small.reason : ''}`,
    );
  });
});
