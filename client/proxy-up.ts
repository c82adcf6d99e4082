// `egressctl proxy up`: starts a proxy's lifecycle workflow (ID `proxy/<entry>/<name>`) as the API
// does (proxies.ts: the same spec finds the run already open, another spec is a conflict), then
// reads its `status` query until the proxy is Healthy: again as soon as the workflow's history
// grows (a long poll on it: every change of the status is recorded by a workflow task, so Healthy
// is seen when it is recorded), and at least every POLL_MS for what no event marks (the image
// upload's bytes). It prints progress (state changes, image upload bytes and rate, boot, address,
// probes) on stderr; at the end, its address, a `curl` line that uses it (run here where this
// machine routes to the guest, else on its host over SSH) and the Web UI link to its run. Stdout
// gets one JSON line.
import type { Client } from '@temporalio/client';
import { proxyWorkflowId } from '../contracts/proxy.ts';
import type { ProxySpec, ProxyStatus } from '../contracts/proxy.ts';
import { canonicalSpec, proxyStatus, sameSpec, startProxy } from './proxies.ts';

export interface ProxyUpOptions {
  name: string;
  /** The status is read at least this often, in ms (default POLL_MS); otherwise when the history grows. */
  pollMs?: number;
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
  const pollMs = o.pollMs ?? POLL_MS;
  const stop = new AbortController();
  const grown = followHistory(client, workflowId, stop.signal, pollMs);
  try {
    return await follow();
  } finally {
    stop.abort();
  }

  async function follow(): Promise<ProxyUpResult> {
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
      await grown.next(Math.max(0, Math.min(pollMs, deadline - performance.now())));
    }
  }
}

/**
 * Long-polls the workflow's history (its current run; the next run after a continue-as-new) in the
 * background until `signal` aborts; `next(ms)` resolves when new events arrived since the last
 * call, or after `ms`. An error or a closed run pauses the poll for `pauseMs`.
 */
export function followHistory(
  client: Client,
  workflowId: string,
  signal: AbortSignal,
  pauseMs: number,
): { next(ms: number): Promise<void> } {
  let grew = false;
  let wake: (() => void) | undefined;
  const fire = (): void => {
    grew = true;
    wake?.();
  };
  const pause = (): Promise<void> =>
    new Promise((resolve) => {
      const t = setTimeout(resolve, pauseMs);
      signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
    });
  void (async () => {
    let token: Uint8Array | undefined;
    while (!signal.aborted) {
      try {
        const res = await client.withAbortSignal(signal, () =>
          client.workflowService.getWorkflowExecutionHistory({
            namespace: client.options.namespace,
            execution: { workflowId },
            ...(token === undefined ? {} : { nextPageToken: token }),
            waitNewEvent: true,
          }),
        );
        if ((res.history?.events?.length ?? 0) > 0) fire();
        token =
          res.nextPageToken !== undefined && res.nextPageToken !== null && res.nextPageToken.length > 0
            ? res.nextPageToken
            : undefined;
        if (token === undefined) await pause(); // the run closed: its successor, if any, from its start
      } catch {
        token = undefined;
        if (!signal.aborted) await pause();
      }
    }
  })();
  return {
    next: (ms) =>
      new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          wake = undefined;
          grew = false;
          resolve();
        };
        const t = setTimeout(done, ms);
        wake = done;
        if (grew || signal.aborted) done();
      }),
  };
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
