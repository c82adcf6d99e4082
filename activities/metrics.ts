// Prometheus metrics of the worker (prom-client, a registry of its own; workers/worker.ts serves
// it on `--metrics-listen HOST:PORT` at /metrics): libvirt RPC latency by procedure and outcome, SSH link
// deaths and failed dials by host, health-probe latency and outcome, exit-IP changes, image bytes uploaded, plus
// prom-client's process figures. The API serves the fleet's counts (proxies by state); these are
// what only the worker sees.
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { HostLinks } from '../lib/hostlink/pool.ts';
import type { LineLogger } from '../lib/log/line-logger.ts';

export interface WorkerMetrics {
  registry: Registry;
  rpc: Histogram<'procedure' | 'outcome' | 'host'>;
  linkDeaths: Counter<'host' | 'link'>;
  dialFailures: Counter<'host' | 'link'>;
  probe: Histogram<'outcome'>;
  uploadBytes: Counter<'host'>;
  exitIpChanges: Counter<'entry'>;
}

export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'egress_worker_' });
  return {
    registry,
    rpc: new Histogram({
      name: 'egress_libvirt_rpc_duration_seconds',
      help: 'libvirt remote-procedure calls by procedure, host and outcome (ok, error)',
      labelNames: ['procedure', 'outcome', 'host'] as const,
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: [registry],
    }),
    linkDeaths: new Counter({
      name: 'egress_ssh_link_deaths_total',
      help: 'SSH links that died (any reason, a deliberate close included), by host and purpose',
      labelNames: ['host', 'link'] as const,
      registers: [registry],
    }),
    dialFailures: new Counter({
      name: 'egress_ssh_dial_failures_total',
      help: 'SSH dials that failed, by host and purpose',
      labelNames: ['host', 'link'] as const,
      registers: [registry],
    }),
    probe: new Histogram({
      name: 'egress_health_probe_duration_seconds',
      help: 'health probes (CONNECT through Squid) by outcome: ok, or the failure code',
      labelNames: ['outcome'] as const,
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    exitIpChanges: new Counter({
      name: 'egress_proxy_exit_ip_changes_total',
      help: "changes of a proxy's exit IP (health.egressIpUrl read through it) from one address to another, by entry",
      labelNames: ['entry'] as const,
      registers: [registry],
    }),
    uploadBytes: new Counter({
      name: 'egress_image_upload_bytes_total',
      help: 'base-image bytes uploaded into host pools, by host',
      labelNames: ['host'] as const,
      registers: [registry],
    }),
  };
}

/**
 * The logger the host links get: it passes every line on, and turns the one line per libvirt
 * call (`lib/libvirt/observe.ts`: `proc`, `duration_ms`, `outcome`) into the RPC histogram.
 */
export function meteringLogger(inner: LineLogger, m: WorkerMetrics): LineLogger {
  const record = (obj: object): void => {
    const o = obj as { proc?: unknown; duration_ms?: unknown; outcome?: unknown; host?: unknown };
    if (typeof o.proc !== 'string' || typeof o.duration_ms !== 'number') return;
    m.rpc.observe(
      {
        procedure: o.proc,
        outcome: o.outcome === 'ok' ? 'ok' : 'error',
        host: typeof o.host === 'string' ? o.host : '',
      },
      o.duration_ms / 1000,
    );
  };
  return {
    info: (obj, msg) => {
      record(obj);
      inner.info(obj, msg);
    },
    warn: (obj, msg) => {
      record(obj);
      inner.warn(obj, msg);
    },
  };
}

/** Counts a host's link deaths and failed dials. */
export function meterLinks(links: HostLinks, m: WorkerMetrics): void {
  const host = links.target.name;
  links.on('death', (e) => m.linkDeaths.inc({ host, link: e.purpose }));
  links.on('dial', (e) => {
    if (e.error) m.dialFailures.inc({ host, link: e.purpose });
  });
}
