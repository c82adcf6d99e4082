// `egressctl proxy up`: starts a proxy's lifecycle workflow (ID `proxy/<entry>/<name>`) as the API
// does (proxies.ts: the same spec finds the run already open, another spec is a conflict), then follows its `status` query until the proxy is Healthy, printing progress
// (state changes, image upload bytes and rate, boot, address, probes) on stderr; at the end, its
// address, a `curl` line that uses it (run here where this machine routes to the guest, else on
// its host over SSH) and the Web UI link to its run. Stdout gets one JSON line.
import type { Client } from '@temporalio/client';
import { proxyWorkflowId } from '../contracts/proxy.ts';
import type { ProxySpec, ProxyStatus } from '../contracts/proxy.ts';
import { canonicalSpec, proxyStatus, sameSpec, startProxy } from './proxies.ts';

export interface ProxyUpOptions {
  name: string;
  entry: string;
  imageKey: string;
  taskQueue: string;
  /** Bound on the whole wait for Healthy, in ms. */
  waitMs: number;
  /** The providers file, read for the `curl` line (the host's SSH address and the health target). */
  providersFile?: string;
  /**
   * Reads `providersFile` (the entry point passes lib/config's `loadProvidersFile`; client/ does
   * not read files). Without it the `curl` line names the host and target generically.
   */
  loadProviders?: (file: string) => Promise<ProvidersView>;
  /**
   * Whether this machine routes to the guest's `ip` (the entry point passes lib/probe/route.ts's
   * decision, `health.via` of the entry as `via`): the `curl` line then runs here, not on the host.
   */
  reachesDirectly?: (ip: string, via: string | undefined) => Promise<boolean>;
  /** Base URL of the Temporal Web UI. */
  webUi: string;
  namespace: string;
}

/** What the `curl` line needs of the providers file (lib/config's ProvidersConfig has it). */
export interface ProvidersView {
  providers: readonly {
    name: string;
    health: { target?: string | undefined; via?: string | undefined };
    hosts: readonly {
      name: string;
      address: string;
      port: number;
      user: string;
      keyFile?: string | undefined;
      knownHostsFile?: string | undefined;
    }[];
  }[];
}

export interface ProxyUpResult {
  workflowId: string;
  reused: boolean;
  host: string;
  ip: string;
  port: number;
  curl: string;
  /** Where the `curl` line runs: this machine (it routes to the guest) or the guest's host (over SSH). */
  curlFrom: 'machine' | 'host';
  webUi: string;
}

const MiB = 2 ** 20;
const QUERY_BOUND_MS = 15_000;
const POLL_MS = 1_000;

export async function proxyUp(client: Client, o: ProxyUpOptions): Promise<ProxyUpResult> {
  const workflowId = proxyWorkflowId(o.entry, o.name);
  const t0 = performance.now();
  const say = (line: string): void =>
    void process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
  const link = `${o.webUi}/namespaces/${encodeURIComponent(o.namespace)}/workflows/${encodeURIComponent(workflowId)}`;

  const spec: ProxySpec = { name: o.name, entry: o.entry, imageKey: o.imageKey };
  const start = await startProxy(client, spec, {
    taskQueue: o.taskQueue,
    staticSummary: `proxy ${o.name} of ${o.entry} (egressctl proxy up)`,
  });
  const running = !start.started;
  if (start.started) {
    say(`started workflow ${workflowId} on task queue ${o.taskQueue}`);
  } else if (sameSpec(start, spec)) {
    say(`reusing the running workflow ${workflowId}`);
  } else {
    throw new Error(
      `proxy ${o.entry}/${o.name} runs with another spec ` +
        `(${start.spec === undefined ? 'unknown' : canonicalSpec(start.spec)}); delete it first or choose another name`,
    );
  }
  say(`Web UI: ${link}`);

  const deadline = performance.now() + o.waitMs;
  let last: ProxyStatus | undefined;
  let lastImageSaid = 0;
  let queryFailures = 0;
  for (;;) {
    let st: ProxyStatus | undefined;
    try {
      st = await proxyStatus(client, o.entry, o.name, QUERY_BOUND_MS);
      queryFailures = 0;
    } catch (err) {
      // No worker yet (it is starting) or a query overran: say so once in a while, keep waiting.
      if (queryFailures++ % 10 === 0) say(`status query: ${(err as Error).message}`);
    }
    if (st) {
      describeChange(last, st, say, () => {
        const now = performance.now();
        if (now - lastImageSaid < 2_000) return false;
        lastImageSaid = now;
        return true;
      });
      last = st;
      if (st.state === 'Failed')
        throw new Error(`proxy ${o.name} failed: ${st.reason ?? ''} ${st.lastError?.message ?? ''}`);
      if (st.state === 'Deleted' || st.state === 'Deleting') throw new Error(`proxy ${o.name} is ${st.state}`);
      if (st.state === 'Running' && st.conditions.Healthy.status === 'True' && st.ip && st.host) {
        const { curl, from } = await curlLine(o, st.host, st.ip, st.port);
        return {
          workflowId,
          reused: running,
          host: st.host,
          ip: st.ip,
          port: st.port,
          curl,
          curlFrom: from,
          webUi: link,
        };
      }
    }
    if (performance.now() > deadline) {
      throw new Error(
        `proxy ${o.name} not Healthy within ${o.waitMs} ms; last status: ${JSON.stringify(last ?? 'none')}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function describeChange(
  prev: ProxyStatus | undefined,
  st: ProxyStatus,
  say: (line: string) => void,
  imageTick: () => boolean,
): void {
  const c = st.conditions;
  if (prev === undefined && st.state !== 'Pending') {
    // Joining a running workflow: where it stands, then only what changes.
    say(
      `${st.state}${st.host ? ` on ${st.host}` : ''}${st.ip ? `, address ${st.ip}` : ''}, VmRunning=${c.VmRunning.status}, ` +
        `Healthy=${c.Healthy.status}${st.reason ? ` (${st.reason})` : ''}`,
    );
    return;
  }
  if (prev?.state !== st.state || prev.reason !== st.reason) {
    say(`${st.state}${st.host ? ` on ${st.host}` : ''}${st.reason ? ` (${st.reason})` : ''}`);
  }
  if (st.image && st.image.totalBytes > 0 && imageTick()) {
    const { bytes, totalBytes, bytesPerSecond } = st.image;
    say(
      `image upload ${(bytes / MiB).toFixed(0)}/${(totalBytes / MiB).toFixed(0)} MiB at ${(bytesPerSecond / MiB).toFixed(0)} MiB/s`,
    );
  } else if (st.image && !prev?.image) {
    say(`waiting for the base image (${st.image.workflowId})`);
  } else if (!st.image && prev?.image) {
    say('base image ready');
  }
  if (prev?.conditions.VmRunning.status !== c.VmRunning.status && c.VmRunning.status === 'True') {
    say('VM running; waiting for its address and its first health probe');
  }
  if (prev?.ip !== st.ip && st.ip) say(`address ${st.ip}; waiting for Squid to answer the health probe`);
  if (prev?.health.totalFailed !== st.health.totalFailed && st.health.lastError && c.Healthy.status !== 'True') {
    say(`probe ${st.health.totalFailed} not yet: ${st.health.lastError.slice(0, 120)}`);
  }
  if (prev?.conditions.Healthy.status !== c.Healthy.status) {
    say(`Healthy=${c.Healthy.status}${c.Healthy.reason ? ` (${c.Healthy.reason})` : ''}`);
  }
}

/**
 * `curl` through the proxy to the entry's health target: run here when this machine routes to the
 * guest (`reachesDirectly`), else as `ssh … <host> curl` (a guest behind its host's NAT).
 */
export async function curlLine(
  o: Pick<ProxyUpOptions, 'entry' | 'providersFile' | 'loadProviders' | 'reachesDirectly'>,
  hostName: string,
  ip: string,
  port: number,
): Promise<{ curl: string; from: 'machine' | 'host' }> {
  let ssh = `ssh ${hostName}`;
  let url = 'http://<target>/';
  let via: string | undefined;
  if (o.providersFile !== undefined && o.loadProviders !== undefined) {
    const config = await o.loadProviders(o.providersFile);
    const entry = config.providers.find((e) => e.name === o.entry);
    const h = entry?.hosts.find((x) => x.name === hostName);
    if (h) {
      const key = h.keyFile ? ` -i ${h.keyFile}` : '';
      const kh = h.knownHostsFile ? ` -o UserKnownHostsFile=${h.knownHostsFile}` : '';
      ssh = `ssh${key}${kh} -p ${h.port} ${h.user}@${h.address}`;
    }
    if (entry?.health.target) url = `http://${entry.health.target}/`;
    via = entry?.health.via;
  }
  // -p tunnels the request with CONNECT (as the health probe does).
  const curl = `curl -sS -p -x http://${ip}:${port} ${url}`;
  if (o.reachesDirectly !== undefined && (await o.reachesDirectly(ip, via))) return { curl, from: 'machine' };
  return { curl: `${ssh} ${curl}`, from: 'host' };
}
