#!/usr/bin/env node
// egressctl: the operator CLI over the HTTP API (docs/api.md). Run with Node 22.6+ (type
// stripping); installed as the package's `egressctl` bin.
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { join } from 'node:path';
import { api, CliError, EXIT, readToken, table } from '../cli/http.ts';
import type { ApiTarget } from '../cli/http.ts';
// `dev` and `hosts check` load their dependencies (the worker's and the SSH side's) when they run,
// so that `--help` and the API commands start without them (docs/benchmarks.md, start-up).

const GLOBAL = `Global options:
  --api URL            the API (default $EGRESSCTL_API or http://127.0.0.1:8080)
  --token-file FILE    bearer token file (default $EGRESSCTL_TOKEN_FILE); its first token is sent
  --output json|table  output format (default table; json prints one JSON document or line per item)
  --timeout-ms MS      bound on each request (default 30000)
  -h, --help           help of the command

Exit codes: 0 ok, 1 failure (including 401/403 and a Failed proxy), 2 usage or bad input (400),
3 not found (404), 4 conflict (409), 5 API or Temporal unavailable (unreachable, 503).`;

const HELP: Record<string, string> = {
  '': `egressctl: start, inspect and delete egress proxies through the API

Commands:
  proxy create ENTRY/NAME --image KEY [--vcpus N] [--memory-mib N] [--disk-gib N] [--squid-port N] [--allow-cidr CIDR]...
  proxy get ENTRY/NAME
  proxy list [--entry E] [--state S] [--host H] [--healthy true|false] [--all] [--page-size N] [--page-token T]
  proxy delete ENTRY/NAME [--wait] [--wait-ms MS]
  proxy watch ENTRY/NAME [--until STATE] [--interval-ms MS] [--watch-ms MS]
  image warm ENTRY/KEY [--wait] [--wait-ms MS]
  dev [--providers FILE] [--api-port N] [--data DIR]
  hosts check --providers FILE [--entry E]
  discovery [--entry E]

${GLOBAL}`,
  'proxy create': `egressctl proxy create ENTRY/NAME --image KEY [options]
  Starts the proxy's workflow. The same spec again prints the existing proxy (exit 0); another spec
  for the same ENTRY/NAME exits 4.
  --image KEY          image key of the entry (required)
  --vcpus N, --memory-mib N, --disk-gib N    VM size (default: the entry's)
  --squid-port N       Squid's port (default: the entry's)
  --allow-cidr CIDR    client network allowed to use the proxy (repeat; default: the entry's)`,
  'proxy get': `egressctl proxy get ENTRY/NAME
  Prints the proxy's workflow and its status query (state, host, ip, conditions, image progress).`,
  'proxy list': `egressctl proxy list [filters]
  Lists proxies from the search attributes. Open ones only unless --all or --state is given.
  --entry E  --state S  --host H  --healthy true|false  --all  --page-size N  --page-token T
  With --output json the next page token is printed as nextPageToken.`,
  'proxy delete': `egressctl proxy delete ENTRY/NAME [--wait] [--wait-ms MS]
  Asks the workflow to delete the proxy. --wait waits until it is Deleted (bounded by --wait-ms,
  default 60000); exit 1 if it ended Failed or is still deleting at the bound.`,
  'proxy watch': `egressctl proxy watch ENTRY/NAME [--until STATE] [--interval-ms MS] [--watch-ms MS]
  Polls the status query and prints each change of state, reason, address, health and image upload
  progress. Ends with exit 0 once the proxy reaches --until (default Running; Deleted also ends
  it), 1 if it is Failed or --watch-ms (default 600000) passes first, 3 if there is no such proxy.
  --interval-ms MS     poll interval (default 1000)`,
  'hosts check': `egressctl hosts check --providers FILE [--entry E]
  Dials every host of the providers file over SSH (not through the API) and prints its health:
  reachability, round trip, libvirt and hypervisor versions, pool space. Exit 1 if any host fails,
  2 on a bad file (the error names the field).`,
  'image warm': `egressctl image warm ENTRY/KEY [--wait] [--wait-ms MS]
  Fetches the base image KEY onto every host of ENTRY ahead of the first proxy (one download and
  upload per host, shared with any proxy that needs the same base meanwhile). --wait waits for the
  result (bounded by --wait-ms, default 600000) and prints, per host, ok, cached and size; exit 1 if
  any host failed or the warm is still running at the bound, 2 for an unknown entry or key.`,
  dev: `egressctl dev [--providers FILE] [--api-port N] [--data DIR]
  The embedded stack on this machine, on loopback: the Temporal dev server (scripts/temporal; left
  running if it already was), a worker (--providers, default .data/providers.yaml, which
  scripts/main writes) and the API on --api-port (default 8080) with a token file made once in
  --data (default .data). Prints the API and Web UI URLs and where the JSON logs go; Ctrl-C stops
  the API, the worker and the dev server it started. Exit 1 if the worker or the API dies.`,
  discovery: `egressctl discovery [--entry E]
  Healthy proxies only, as ip:port with entry and age: what clients of the proxies use.`,
};

const globalOptions = {
  api: { type: 'string' },
  'token-file': { type: 'string' },
  output: { type: 'string' },
  'timeout-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} satisfies ParseArgsConfig['options'];

const commandOptions: Record<string, ParseArgsConfig['options']> = {
  'proxy create': {
    image: { type: 'string' },
    vcpus: { type: 'string' },
    'memory-mib': { type: 'string' },
    'disk-gib': { type: 'string' },
    'squid-port': { type: 'string' },
    'allow-cidr': { type: 'string', multiple: true },
  },
  'proxy get': {},
  'proxy list': {
    entry: { type: 'string' },
    state: { type: 'string' },
    host: { type: 'string' },
    healthy: { type: 'string' },
    all: { type: 'boolean' },
    'page-size': { type: 'string' },
    'page-token': { type: 'string' },
  },
  'proxy delete': { wait: { type: 'boolean' }, 'wait-ms': { type: 'string' } },
  'proxy watch': { until: { type: 'string' }, 'interval-ms': { type: 'string' }, 'watch-ms': { type: 'string' } },
  'hosts check': { providers: { type: 'string' }, entry: { type: 'string' } },
  'image warm': { wait: { type: 'boolean' }, 'wait-ms': { type: 'string' } },
  dev: { providers: { type: 'string' }, 'api-port': { type: 'string' }, data: { type: 'string' } },
  discovery: { entry: { type: 'string' } },
};

const out = (s: string): boolean => process.stdout.write(s + '\n');
const usage = (message: string): CliError => new CliError(EXIT.usage, message);

function positive(name: string, text: string | undefined, dflt?: number): number | undefined {
  if (text === undefined) return dflt;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0)
    throw usage(`--${name} must be a positive whole number, got ${JSON.stringify(text)}`);
  return n;
}

function proxyRef(arg: string | undefined): { entry: string; name: string } {
  const m = arg === undefined ? null : /^([^/\s]+)\/([^/\s]+)$/.exec(arg);
  if (m === null) throw usage(`expected ENTRY/NAME (e.g. lab/p1), got ${JSON.stringify(arg ?? '')}`);
  return { entry: m[1]!, name: m[2]! };
}

const enc = encodeURIComponent;

async function main(argv: string[]): Promise<number> {
  const loose = parseArgs({ args: argv, options: globalOptions, allowPositionals: true, strict: false });
  const words = loose.positionals;
  const command = ['proxy', 'hosts', 'image'].includes(words[0] ?? '')
    ? `${words[0]} ${words[1] ?? ''}`
    : (words[0] ?? '');
  const specific = commandOptions[command];
  if (specific === undefined) {
    if (loose.values.help && command === '') return (out(HELP['']!), EXIT.ok);
    throw usage(`unknown command ${JSON.stringify(words.slice(0, 2).join(' '))}\n\n${HELP['']}`);
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { ...globalOptions, ...specific },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw usage(`${(err as Error).message}; see egressctl ${command} --help`);
  }
  const v = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (v['help'] === true) return (out(`${HELP[command]}\n\n${GLOBAL}`), EXIT.ok);
  const args = parsed.positionals.slice(command.includes(' ') ? 2 : 1);
  const str = (k: string): string | undefined => v[k] as string | undefined;
  const output = str('output') ?? 'table';
  if (output !== 'json' && output !== 'table') throw usage(`--output must be json or table, got ${output}`);
  const json = output === 'json';
  const timeoutMs = positive('timeout-ms', str('timeout-ms'), 30_000)!;
  const maxArgs = ['proxy list', 'discovery', 'hosts check', 'dev'].includes(command) ? 0 : 1;
  if (args.length > maxArgs) throw usage(`unexpected argument ${JSON.stringify(args[maxArgs])}; see --help`);

  if (command === 'dev') {
    const data = str('data') ?? join(process.cwd(), '.data');
    const { runDev } = await import('../dev/stack.ts');
    return runDev({
      providers: str('providers') ?? join(data, 'providers.yaml'),
      dataDir: data,
      apiPort: positive('api-port', str('api-port'), 8080)!,
      out,
    });
  }

  if (command === 'hosts check') {
    const providers = str('providers');
    if (providers === undefined) throw usage('hosts check needs --providers FILE');
    const [{ createLogger, logLevelFromEnv }, { checkHosts }] = await Promise.all([
      import('../lib/log/logger.ts'),
      import('../lib/kvm2/host-check.ts'),
    ]);
    const log = createLogger({ name: 'egressctl', stream: 'stderr', level: logLevelFromEnv(process.env, 'warn') });
    const lines: Record<string, unknown>[] = [];
    const ok = await checkHosts(providers, str('entry'), {
      timeoutMs,
      log,
      onLine: (line) => (json ? out(JSON.stringify(line)) : lines.push({ ...line })),
    });
    if (!json) out(table(lines, ['host', 'reachable', 'connectMs', 'libvirtVersion', 'kind', 'error']));
    return ok ? EXIT.ok : EXIT.failure;
  }

  const tokenFile = str('token-file') ?? process.env['EGRESSCTL_TOKEN_FILE'];
  const apiUrl = str('api') ?? process.env['EGRESSCTL_API'] ?? 'http://127.0.0.1:8080';
  if (!URL.canParse(apiUrl)) throw usage(`--api must be a URL such as http://127.0.0.1:8080, got ${apiUrl}`);
  const t: ApiTarget = {
    base: new URL(apiUrl),
    token: tokenFile === undefined ? undefined : await readToken(tokenFile),
    timeoutMs,
  };
  const print = (body: unknown, rows: Record<string, unknown>[], columns: string[]): void => {
    out(json ? JSON.stringify(body) : table(rows, columns));
  };
  const columns = ['entry', 'name', 'state', 'healthy', 'host', 'ip', 'execution', 'startTime'];

  switch (command) {
    case 'proxy create': {
      const { entry, name } = proxyRef(args[0]);
      const image = str('image');
      if (image === undefined) throw usage('proxy create needs --image KEY');
      const vm = {
        vcpus: positive('vcpus', str('vcpus')),
        memoryMiB: positive('memory-mib', str('memory-mib')),
        diskGiB: positive('disk-gib', str('disk-gib')),
      };
      const port = positive('squid-port', str('squid-port'));
      const cidrs = v['allow-cidr'] as string[] | undefined;
      const squid = { port, allowedClientCidrs: cidrs };
      const defined = (o: object): boolean => Object.values(o).some((x) => x !== undefined);
      const spec = {
        name,
        entry,
        imageKey: image,
        ...(defined(vm) ? { vm: JSON.parse(JSON.stringify(vm)) as object } : {}),
        ...(defined(squid) ? { squid: JSON.parse(JSON.stringify(squid)) as object } : {}),
      };
      const res = await api(t, 'POST', '/v1/proxies', spec);
      const body = res.body as { created: boolean; proxy: Record<string, unknown> };
      print(body, [{ ...body.proxy, created: body.created }], ['entry', 'name', 'created', 'state', 'workflowId']);
      return EXIT.ok;
    }
    case 'proxy get': {
      const { entry, name } = proxyRef(args[0]);
      const res = await api(t, 'GET', `/v1/proxies/${enc(entry)}/${enc(name)}`);
      const body = res.body as { proxy: Record<string, unknown>; status?: Record<string, unknown> };
      const st = body.status ?? {};
      print(
        body,
        [
          {
            ...body.proxy,
            ...st,
            healthy: (st['conditions'] as { Healthy?: { status?: string } } | undefined)?.Healthy?.status,
            reason: st['reason'],
          },
        ],
        ['entry', 'name', 'state', 'healthy', 'host', 'ip', 'port', 'reason'],
      );
      return EXIT.ok;
    }
    case 'proxy list': {
      const q = new URLSearchParams();
      for (const k of ['entry', 'state', 'host', 'healthy'] as const) if (str(k) !== undefined) q.set(k, str(k)!);
      if (v['all'] === true) q.set('all', 'true');
      if (str('page-size') !== undefined) q.set('pageSize', String(positive('page-size', str('page-size'))));
      if (str('page-token') !== undefined) q.set('pageToken', str('page-token')!);
      const res = await api(t, 'GET', `/v1/proxies?${q.toString()}`);
      const body = res.body as { proxies: Record<string, unknown>[]; nextPageToken?: string };
      print(body, body.proxies, columns);
      if (!json && body.nextPageToken) process.stderr.write(`more: --page-token ${body.nextPageToken}\n`);
      return EXIT.ok;
    }
    case 'proxy delete': {
      const { entry, name } = proxyRef(args[0]);
      const q = new URLSearchParams();
      if (v['wait'] === true) q.set('wait', 'true');
      if (str('wait-ms') !== undefined) q.set('waitMs', String(positive('wait-ms', str('wait-ms'))));
      const waitMs = positive('wait-ms', str('wait-ms'), 60_000)!;
      const res = await api(
        { ...t, timeoutMs: t.timeoutMs + (v['wait'] === true ? waitMs : 0) },
        'DELETE',
        `/v1/proxies/${enc(entry)}/${enc(name)}?${q.toString()}`,
      );
      const body = res.body as { done?: boolean; state?: string; fromState?: string };
      print(body, [{ entry, name, ...body }], ['entry', 'name', 'fromState', 'done', 'state']);
      if (v['wait'] === true && (body.done !== true || body.state === 'Failed')) return EXIT.failure;
      return EXIT.ok;
    }
    case 'proxy watch':
      return watch(t, proxyRef(args[0]), json, {
        until: str('until') ?? 'Running',
        intervalMs: positive('interval-ms', str('interval-ms'), 1000)!,
        watchMs: positive('watch-ms', str('watch-ms'), 600_000)!,
      });
    case 'image warm': {
      const m = /^([^/\s]+)\/([^/\s]+)$/.exec(args[0] ?? '');
      if (m === null) throw usage(`expected ENTRY/KEY (e.g. lab/debian12), got ${JSON.stringify(args[0] ?? '')}`);
      const [entry, key] = [m[1]!, m[2]!];
      const wait = v['wait'] === true;
      const waitMs = positive('wait-ms', str('wait-ms'), 600_000)!;
      const q = wait ? `?wait=true&waitMs=${waitMs}` : '';
      const res = await api(
        { ...t, timeoutMs: t.timeoutMs + (wait ? waitMs : 0) },
        'POST',
        `/v1/images/${enc(entry)}/${enc(key)}/warm${q}`,
      );
      const body = res.body as {
        state: string;
        workflowId: string;
        error?: string;
        result?: { hosts: { host: string; ok: boolean; cached?: boolean; sizeBytes?: number; error?: string }[] };
      };
      const rows = body.result?.hosts ?? [{ host: '-', state: body.state, error: body.error }];
      print(body, rows, body.result ? ['host', 'ok', 'cached', 'sizeBytes', 'error'] : ['host', 'state', 'error']);
      if (!wait) return EXIT.ok;
      if (body.state === 'Failed')
        return /PROXY_SPEC_INVALID|has no image|no provider entry/.test(body.error ?? '') ? EXIT.usage : EXIT.failure;
      if (body.state !== 'Done' || body.result?.hosts.some((h) => !h.ok)) return EXIT.failure;
      return EXIT.ok;
    }
    case 'discovery': {
      const q = str('entry') === undefined ? '' : `?entry=${enc(str('entry')!)}`;
      const res = await api(t, 'GET', `/v1/discovery${q}`);
      const body = res.body as { proxies: Record<string, unknown>[] };
      print(body, body.proxies, ['address', 'entry', 'name', 'host', 'ageSeconds', 'healthySince']);
      return EXIT.ok;
    }
  }
  throw usage(`unknown command ${command}`);
}

async function watch(
  t: ApiTarget,
  ref: { entry: string; name: string },
  json: boolean,
  o: { until: string; intervalMs: number; watchMs: number },
): Promise<number> {
  const deadline = Date.now() + o.watchMs;
  let last = '';
  for (;;) {
    const res = await api(t, 'GET', `/v1/proxies/${enc(ref.entry)}/${enc(ref.name)}`);
    const body = res.body as { status?: Record<string, unknown>; proxy: Record<string, unknown> };
    const st = body.status;
    const state = (st?.['state'] ?? body.proxy['state'] ?? 'unknown') as string;
    const image = st?.['image'] as { bytes: number; totalBytes: number } | undefined;
    const healthy = (st?.['conditions'] as { Healthy?: { status?: string } } | undefined)?.Healthy?.status;
    const view = {
      state,
      reason: st?.['reason'] as string | undefined,
      host: st?.['host'] as string | undefined,
      ip: st?.['ip'] as string | undefined,
      healthy,
      image: image === undefined ? undefined : { bytes: image.bytes, totalBytes: image.totalBytes },
    };
    const key = JSON.stringify(view);
    if (key !== last) {
      last = key;
      const at = new Date().toISOString();
      if (json) out(JSON.stringify({ at, ...view }));
      else {
        const mib = (n: number): string => (n / 1048576).toFixed(1);
        const img =
          image && image.totalBytes > 0
            ? ` image ${mib(image.bytes)}/${mib(image.totalBytes)} MiB (${Math.floor((100 * image.bytes) / image.totalBytes)}%)`
            : '';
        out(
          `${at} ${state}${view.host ? ` host=${view.host}` : ''}${view.ip ? ` ip=${view.ip}` : ''}${healthy ? ` healthy=${healthy}` : ''}${img}${view.reason ? ` (${view.reason})` : ''}`,
        );
      }
    }
    if (state === 'Failed') return EXIT.failure;
    if (state === o.until || state === 'Deleted') return EXIT.ok;
    if (Date.now() >= deadline) {
      throw new CliError(
        EXIT.failure,
        `proxy ${ref.entry}/${ref.name} is ${state}, not ${o.until}, after --watch-ms ${o.watchMs}`,
      );
    }
    await new Promise((r) => setTimeout(r, Math.min(o.intervalMs, Math.max(0, deadline - Date.now()))));
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof CliError) {
    process.stderr.write(`${err.message}\n`);
    process.exitCode = err.code;
  } else if ((await import('../lib/kvm2/host-check.ts')).isUsageError(err)) {
    // A bad providers file or host-check arguments (host-check.ts is loaded: the error came from it).
    process.stderr.write(`${(err as Error).message}\n`);
    process.exitCode = EXIT.usage;
  } else {
    process.stderr.write(`egressctl failed: ${(err as Error).message}\n`);
    process.exitCode = EXIT.failure;
  }
}
