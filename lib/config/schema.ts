/**
 * The providers file: its zod schema, the typed config it yields, and one line of help per field
 * (used by error fixes and mirrored in docs/operator-guide.md). Every object is strict: an unknown
 * key is an error that lists the allowed keys.
 */
import { isAbsolute } from 'node:path';
import { isIP } from 'node:net';
import { z } from 'zod';
import {
  DEFAULT_LIBVIRT_SOCKET,
  DEFAULT_SSH_PORT,
  IDENTIFIER_RE,
  IDENTIFIER_RULE,
  isHttpUrl,
  MAX_TIMER_MS,
} from '../rules.ts';
import { openBlocks } from '../../contracts/cidr.ts';
import { PORT, VM_LIMITS } from '../../contracts/limits.ts';
import { DEFAULT_CPU_OVERCOMMIT, DEFAULT_MEMORY_OVERCOMMIT } from '../../contracts/fleet.ts';
import { exitIpUrlProblem } from '../probe/exit-ip.ts';
import { HEALTH_VIA } from '../probe/route.ts';
import { HEALTH_MONITORS } from '../../contracts/proxy.ts';
import { HOST_MONITOR_MAX_WATCHES } from '../../contracts/host-monitor.ts';
import { checkCidr, EGRESS_FIELD_HELP, egressFields, egressIssues } from './egress.ts';

/** Lowercase identifier: a letter, then lowercase letters, digits or `-`; at most 40 characters (contracts/limits.ts). */
export { IDENTIFIER_RE };
/** Largest timer Node accepts (setTimeout clamps longer ones to 1 ms). */
export const MAX_TIMEOUT_MS = MAX_TIMER_MS;

const identifier = () => z.string().regex(IDENTIFIER_RE, { error: IDENTIFIER_RULE });
/** A whole number within one of contracts/limits.ts ranges. */
const within = (range: { readonly min: number; readonly max: number }) => z.int().min(range.min).max(range.max);
const port = () => within(PORT);
const absolutePath = () =>
  z
    .string()
    .min(1)
    .refine((p) => isAbsolute(p) && !p.includes('\0'), { error: 'must be an absolute path' });
const libvirtName = () =>
  z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.:+-]{0,127}$/, {
    error: 'must be a libvirt object name (letters, digits, "_", ".", ":", "+", "-"; at most 128)',
  });
const HOSTNAME_RE =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const timeoutMs = (dflt: number, min = 1) => z.int().min(min).max(MAX_TIMEOUT_MS).default(dflt);

export const HostSchema = z.strictObject({
  name: identifier(),
  address: z.string().refine((a) => isIP(a) !== 0 || HOSTNAME_RE.test(a), {
    error: 'must be an IPv4 address, an IPv6 address (without brackets) or a DNS name',
  }),
  port: port().default(DEFAULT_SSH_PORT),
  user: z
    .string()
    .regex(/^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}$/, { error: 'must be a user name (letters, digits, ".", "_", "-")' })
    .default('root'),
  keyFile: absolutePath(),
  passphraseFile: absolutePath().optional(),
  knownHostsFile: absolutePath(),
  socketPath: absolutePath().default(DEFAULT_LIBVIRT_SOCKET),
  weight: z.int().min(1).max(1_000_000).default(1),
  /** At most this many of our proxies of the entry on the host; absent: no limit (0: none). */
  maxProxies: z.int().min(0).max(1_000_000).optional(),
  /** Memory of active domains may reach the host's memory × this (1: no overcommit). */
  memoryOvercommit: z.number().min(0.1).max(100).default(DEFAULT_MEMORY_OVERCOMMIT),
  /** vCPUs of active domains may reach the host's CPUs × this. */
  cpuOvercommit: z.number().min(0.1).max(1000).default(DEFAULT_CPU_OVERCOMMIT),
  /** Domain starts (QEMU processes starting) at once on the host, per worker process; absent: its CPUs. */
  maxConcurrentStarts: z.int().min(1).max(256).optional(),
});

export const VmSchema = z.strictObject({
  vcpus: within(VM_LIMITS.vcpus).default(1),
  memoryMiB: within(VM_LIMITS.memoryMiB).default(512),
  diskGiB: within(VM_LIMITS.diskGiB).default(10),
});

export const ImageSchema = z.strictObject({
  url: z.string().refine(isHttpUrl, { error: 'must be an http:// or https:// URL' }),
  sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, { error: 'must be 64 hexadecimal digits (a SHA-256 digest)' })
    .transform((s) => s.toLowerCase())
    .optional(),
  format: z.enum(['qcow2', 'raw']).default('qcow2'),
});

export const SquidSchema = z.strictObject({
  port: port().default(3128),
  allowedClientCidrs: z.array(z.string().superRefine((text, ctx) => checkCidr(text, ctx))).min(1),
  ...egressFields,
});

export const TimeoutsSchema = z.strictObject({
  rpcMs: timeoutMs(30_000),
  connectMs: timeoutMs(5_000),
  readyMs: timeoutMs(10_000),
  downloadHeadersMs: timeoutMs(30_000),
  downloadBodyIdleMs: timeoutMs(60_000),
  downloadTotalMs: timeoutMs(3_600_000),
  bootMs: timeoutMs(600_000),
  shutdownGraceMs: timeoutMs(0, 0),
});

/** Where and how often a proxy is health-checked (a real CONNECT through its Squid). */
export const HealthSchema = z.strictObject({
  target: z
    .string()
    .regex(/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/, {
      error: 'must be host:port (or [IPv6]:port) that Squid in the guest can reach',
    })
    .optional(),
  intervalMs: timeoutMs(15_000, 100),
  probeTimeoutMs: timeoutMs(5_000),
  healthyAfter: z.int().min(1).max(100).default(2),
  unhealthyAfter: z.int().min(1).max(100).default(3),
  addressGracePolls: z.int().min(0).max(100).default(3),
  maxRecreations: z.int().min(0).max(100).default(3),
  /** A URL whose body is the caller's address, read through each proxy: its exit IP (docs/health.md). */
  egressIpUrl: z
    .string()
    .superRefine((url, ctx) => {
      const problem = exitIpUrlProblem(url);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional(),
  /** The exit IP is read again after this long (and on a proxy's first passing probe), in ms. */
  egressIpIntervalMs: timeoutMs(300_000, 1000),
  /** How the probe reaches a guest: auto (direct where the worker routes to it), direct or ssh (docs/health.md). */
  via: z.enum(HEALTH_VIA).default('auto'),
  /** Who polls and probes the entry's Running proxies: a monitor per proxy (default) or one per host (docs/health.md). */
  monitor: z.enum(HEALTH_MONITORS).optional(),
});

export const ProviderSchema = z.strictObject({
  name: identifier(),
  type: z.literal('kvm2'),
  hosts: z.array(HostSchema).min(1),
  storagePool: libvirtName().default('default'),
  network: libvirtName().default('default'),
  domainType: z.enum(['kvm', 'qemu']).default('kvm'),
  vm: VmSchema.prefault({}),
  images: z
    .record(z.string().regex(IDENTIFIER_RE, { error: `image key ${IDENTIFIER_RULE}` }), ImageSchema)
    .refine((m) => Object.keys(m).length > 0, { error: 'must define at least one image' }),
  squid: SquidSchema,
  timeouts: TimeoutsSchema.prefault({}),
  health: HealthSchema.prefault({}),
});

/** Orphan garbage collection (a Temporal Schedule). */
export const GcSchema = z.strictObject({
  intervalMs: timeoutMs(600_000, 1000),
  minAgeMs: timeoutMs(3_600_000, 0),
});

/** The whole file. Name uniqueness is checked by {@link duplicateNameIssues}, on raw input. */
export const ProvidersFileSchema = z
  .strictObject({
    ownerUid: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,62}$/, { error: 'must be letters, digits and "-", at most 63' })
      .default('egress-proxies'),
    gc: GcSchema.prefault({}),
    hostHealthIntervalMs: timeoutMs(60_000, 1000),
    /** Allow `allowedClientCidrs` that admit every address (an open proxy). Default false: such a list is an error. */
    allowOpenProxy: z.boolean().default(false),
    providers: z.array(ProviderSchema).min(1),
  })
  .superRefine((file, ctx) => {
    file.providers.forEach((entry, i) => {
      if (entry.health.monitor !== 'host') return;
      entry.hosts.forEach((host, j) => {
        if (host.maxProxies === undefined || host.maxProxies <= HOST_MONITOR_MAX_WATCHES) return;
        ctx.addIssue({
          code: 'custom',
          path: ['providers', i, 'hosts', j, 'maxProxies'],
          input: host.maxProxies,
          message: `is ${host.maxProxies}, more than one host monitor holds (health.monitor: host, at most ${HOST_MONITOR_MAX_WATCHES} proxies a host)`,
          params: {
            fix: `set maxProxies: ${HOST_MONITOR_MAX_WATCHES} or less (unset, it is ${HOST_MONITOR_MAX_WATCHES} with the host monitor), or use health.monitor: proxy for this entry`,
          },
        });
      });
    });
    file.providers.forEach((entry, i) => {
      for (const issue of egressIssues(entry.squid, file.allowOpenProxy, entry.health.target)) {
        ctx.addIssue({
          code: 'custom',
          path: ['providers', i, 'squid', ...issue.path],
          input: issue.input,
          message: issue.message,
          params: { fix: issue.fix },
        });
      }
    });
    if (file.allowOpenProxy) return;
    file.providers.forEach((entry, i) => {
      const cidrs = entry.squid.allowedClientCidrs;
      for (const { index, problem } of openBlocks(cidrs)) {
        ctx.addIssue({
          code: 'custom',
          path: ['providers', i, 'squid', 'allowedClientCidrs', index],
          input: cidrs[index],
          message: `${cidrs[index]} ${problem}: Squid would be an open proxy`,
          params: {
            fix: 'list the client networks that may use the proxies (e.g. 10.0.0.0/8), or set `allowOpenProxy: true` at the top of the file if an open proxy is really meant',
          },
        });
      }
    });
  });

/** The validated providers file, defaults applied. */
export type ProvidersConfig = z.output<typeof ProvidersFileSchema>;
/** One provider entry (`providers[i]`). */
export type ProviderEntry = z.output<typeof ProviderSchema>;
/** One libvirt host of an entry (`providers[i].hosts[j]`). */
export type HostConfig = z.output<typeof HostSchema>;
/** One base image of an entry (`providers[i].images.<key>`). */
export type ImageConfig = z.output<typeof ImageSchema>;
export type VmConfig = z.output<typeof VmSchema>;
export type SquidConfig = z.output<typeof SquidSchema>;
export type TimeoutsConfig = z.output<typeof TimeoutsSchema>;
export type HealthConfig = z.output<typeof HealthSchema>;
export type GcConfig = z.output<typeof GcSchema>;

/** The keys an object accepts, by normalized path (`providers[].hosts[]`): listed in unknown-key fixes. */
export const ALLOWED_KEYS: Readonly<Record<string, readonly string[]>> = {
  '': Object.keys(ProvidersFileSchema.shape),
  'providers[]': Object.keys(ProviderSchema.shape),
  'providers[].hosts[]': Object.keys(HostSchema.shape),
  'providers[].vm': Object.keys(VmSchema.shape),
  'providers[].images.<key>': Object.keys(ImageSchema.shape),
  'providers[].squid': Object.keys(SquidSchema.shape),
  'providers[].squid.auth': Object.keys(egressFields.auth.unwrap().shape),
  'providers[].timeouts': Object.keys(TimeoutsSchema.shape),
  'providers[].health': Object.keys(HealthSchema.shape),
  gc: Object.keys(GcSchema.shape),
};

/** What a field holds and an example value, by normalized path: the basis of every fix. */
export const FIELD_HELP: Readonly<Record<string, { hint: string; example: string }>> = {
  providers: { hint: 'a list of provider entries', example: 'providers: [{ name: lab, type: kvm2, ... }]' },
  ownerUid: {
    hint: 'the owner UID of this installation, marked on every domain it creates (unique per installation)',
    example: 'ownerUid: prod-eu-1',
  },
  gc: { hint: 'orphan garbage collection (a mapping)', example: 'gc: { intervalMs: 600000, minAgeMs: 3600000 }' },
  'gc.intervalMs': { hint: 'how often orphaned domains are collected, in ms', example: 'intervalMs: 600000' },
  'gc.minAgeMs': {
    hint: 'the age below which a domain without a workflow is never collected, in ms',
    example: 'minAgeMs: 3600000',
  },
  hostHealthIntervalMs: {
    hint: 'how often every host is health-checked, in ms',
    example: 'hostHealthIntervalMs: 60000',
  },
  allowOpenProxy: {
    hint: 'true to allow allowedClientCidrs that admit every address (0.0.0.0/0, ::/0, or blocks that together cover IPv4 or IPv6), which make every proxy an open proxy',
    example: 'allowOpenProxy: false',
  },
  'providers[].health': {
    hint: 'the proxy health check (a mapping)',
    example: 'health: { target: "198.51.100.7:443", intervalMs: 15000 }',
  },
  'providers[].health.target': {
    hint: 'host:port that every proxy is asked to CONNECT to; unset: no probes (Healthy stays Unknown)',
    example: 'target: "198.51.100.7:443"',
  },
  'providers[].health.intervalMs': {
    hint: 'the time between two probes of a proxy, in ms',
    example: 'intervalMs: 15000',
  },
  'providers[].health.probeTimeoutMs': { hint: 'the bound on one probe, in ms', example: 'probeTimeoutMs: 5000' },
  'providers[].health.healthyAfter': {
    hint: 'consecutive passing probes that make a proxy Healthy',
    example: 'healthyAfter: 2',
  },
  'providers[].health.unhealthyAfter': {
    hint: 'consecutive failing probes that make a proxy unhealthy',
    example: 'unhealthyAfter: 3',
  },
  'providers[].health.addressGracePolls': {
    hint: 'polls a Running proxy may read without an address before it loses its IP (H3 in docs/design.md)',
    example: 'addressGracePolls: 3',
  },
  'providers[].health.maxRecreations': {
    hint: 'how often a VM that vanished or failed under a Running proxy is recreated before the proxy fails',
    example: 'maxRecreations: 3',
  },
  'providers[].health.egressIpUrl': {
    hint: 'an http:// URL whose body is the caller\'s address (plain text or JSON {"ip": ...}), read through each proxy to record its exit IP; its host and port must be allowed by the destination policy; unset: no exit IP',
    example: 'egressIpUrl: "http://198.51.100.7/ip"',
  },
  'providers[].health.egressIpIntervalMs': {
    hint: 'how often the exit IP is read again, in ms (it is read on the first passing probe of a Healthy proxy, then at most once per probe and this often)',
    example: 'egressIpIntervalMs: 300000',
  },
  'providers[].health.monitor': {
    hint: "who polls and probes the entry's Running proxies: proxy (one monitor activity per proxy, the default) or host (one per host for all its proxies: one heartbeat per host instead of one per proxy)",
    example: 'monitor: host',
  },
  'providers[].health.via': {
    hint: 'how the probe reaches a guest: auto (straight over TCP where the worker routes the guest address through an interface that carries no default route, else through the host over SSH), direct, or ssh',
    example: 'via: auto',
  },
  'providers[]': { hint: 'a provider entry (a mapping)', example: '- name: lab' },
  'providers[].name': { hint: 'a unique lowercase identifier naming the entry', example: 'name: lab-a' },
  'providers[].type': { hint: 'the provider type; only kvm2 exists', example: 'type: kvm2' },
  'providers[].hosts': { hint: 'a list of at least one libvirt host', example: 'hosts: [{ name: h1, ... }]' },
  'providers[].hosts[]': { hint: 'a host (a mapping)', example: '- name: h1' },
  'providers[].hosts[].name': { hint: 'a lowercase identifier unique within the entry', example: 'name: h1' },
  'providers[].hosts[].address': { hint: 'the host SSH address (IP or DNS name)', example: 'address: 192.0.2.10' },
  'providers[].hosts[].port': { hint: `the SSH port, ${PORT.min}-${PORT.max}`, example: 'port: 22' },
  'providers[].hosts[].user': { hint: 'the SSH user', example: 'user: root' },
  'providers[].hosts[].keyFile': {
    hint: 'the absolute path of the SSH private key on the worker',
    example: 'keyFile: /etc/egress-proxies/ssh/id_ed25519',
  },
  'providers[].hosts[].passphraseFile': {
    hint: 'the absolute path of a file holding the key passphrase (omit for unencrypted keys)',
    example: 'passphraseFile: /etc/egress-proxies/ssh/passphrase',
  },
  'providers[].hosts[].knownHostsFile': {
    hint: 'the absolute path of the OpenSSH known_hosts file listing this host key',
    example: 'knownHostsFile: /etc/egress-proxies/ssh/known_hosts',
  },
  'providers[].hosts[].socketPath': {
    hint: 'the absolute path of libvirtd socket on the host',
    example: 'socketPath: /var/run/libvirt/libvirt-sock',
  },
  'providers[].hosts[].weight': { hint: 'a positive integer share of new proxies', example: 'weight: 1' },
  'providers[].hosts[].maxProxies': {
    hint: `the most proxies of this entry the host holds (0-1000000; omit for no limit, or ${HOST_MONITOR_MAX_WATCHES} with health.monitor: host, which allows at most that); a proxy that finds every host full waits in WaitingForCapacity`,
    example: 'maxProxies: 20',
  },
  'providers[].hosts[].memoryOvercommit': {
    hint: 'a ratio from 0.1 to 100: the maximum memory of the domains running on the host may add up to its memory times this (1: no overcommit)',
    example: 'memoryOvercommit: 1',
  },
  'providers[].hosts[].cpuOvercommit': {
    hint: 'a ratio from 0.1 to 1000: the vCPUs of the domains running on the host may add up to its CPUs times this',
    example: 'cpuOvercommit: 4',
  },
  'providers[].hosts[].maxConcurrentStarts': {
    hint: 'an integer from 1 to 256: domain starts at once on the host from one worker process (omit for one per host CPU); more wait their turn, up to 4 minutes',
    example: 'maxConcurrentStarts: 4',
  },
  'providers[].storagePool': { hint: 'the libvirt storage pool name', example: 'storagePool: default' },
  'providers[].network': { hint: 'the libvirt network name', example: 'network: default' },
  'providers[].domainType': { hint: 'kvm (hardware) or qemu (TCG emulation)', example: 'domainType: kvm' },
  'providers[].vm': { hint: 'the VM size (a mapping)', example: 'vm: { vcpus: 1, memoryMiB: 512, diskGiB: 10 }' },
  'providers[].vm.vcpus': { hint: `virtual CPUs, ${VM_LIMITS.vcpus.min}-${VM_LIMITS.vcpus.max}`, example: 'vcpus: 1' },
  'providers[].vm.memoryMiB': {
    hint: `memory in MiB, ${VM_LIMITS.memoryMiB.min}-${VM_LIMITS.memoryMiB.max}`,
    example: 'memoryMiB: 512',
  },
  'providers[].vm.diskGiB': {
    hint: `the overlay disk size in GiB, ${VM_LIMITS.diskGiB.min}-${VM_LIMITS.diskGiB.max}`,
    example: 'diskGiB: 10',
  },
  'providers[].images': {
    hint: 'a mapping of image keys to images',
    example: 'images: { debian12: { url: "https://mirror.example/debian-12.qcow2" } }',
  },
  'providers[].images.<key>': { hint: 'an image (a mapping)', example: 'debian12: { url: "https://..." }' },
  'providers[].images.<key>.url': {
    hint: 'the http(s) URL of the base image',
    example: 'url: https://mirror.example/debian-12.qcow2',
  },
  'providers[].images.<key>.sha256': {
    hint: 'the SHA-256 of the image file as 64 hex digits (sha256sum prints it)',
    example: 'sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
  },
  'providers[].images.<key>.format': { hint: 'the image file format: qcow2 or raw', example: 'format: qcow2' },
  'providers[].squid': {
    hint: 'the Squid settings (a mapping)',
    example: 'squid: { port: 3128, allowedClientCidrs: [10.0.0.0/8] }',
  },
  'providers[].squid.port': { hint: `the TCP port Squid listens on, ${PORT.min}-${PORT.max}`, example: 'port: 3128' },
  'providers[].squid.allowedClientCidrs': {
    hint: 'a list of at least one IPv4/IPv6 CIDR block allowed to use the proxies',
    example: 'allowedClientCidrs: [10.0.0.0/8, "2001:db8::/32"]',
  },
  'providers[].squid.allowedClientCidrs[]': {
    hint: 'an IPv4 or IPv6 CIDR block with host bits clear',
    example: '- 10.0.0.0/8',
  },
  ...EGRESS_FIELD_HELP,
  'providers[].timeouts': { hint: 'timeouts in milliseconds (a mapping)', example: 'timeouts: { rpcMs: 30000 }' },
  'providers[].timeouts.rpcMs': { hint: 'the budget of one libvirt call in ms', example: 'rpcMs: 30000' },
  'providers[].timeouts.connectMs': { hint: 'the TCP connect budget in ms', example: 'connectMs: 5000' },
  'providers[].timeouts.readyMs': { hint: 'the SSH handshake budget in ms', example: 'readyMs: 10000' },
  'providers[].timeouts.downloadHeadersMs': {
    hint: 'the bound, in ms, on connecting to the image server and, separately, on waiting for its response headers',
    example: 'downloadHeadersMs: 30000',
  },
  'providers[].timeouts.downloadBodyIdleMs': {
    hint: 'the longest pause in the image download in ms',
    example: 'downloadBodyIdleMs: 60000',
  },
  'providers[].timeouts.downloadTotalMs': {
    hint: 'the whole image download budget in ms',
    example: 'downloadTotalMs: 3600000',
  },
  'providers[].timeouts.bootMs': { hint: 'the wait for a new VM address in ms', example: 'bootMs: 600000' },
  'providers[].timeouts.shutdownGraceMs': {
    hint: 'the wait for a clean guest shutdown before destroy in ms (0: destroy at once)',
    example: 'shutdownGraceMs: 0',
  },
};

/** A problem found outside the zod schema, located by a raw path. */
export interface RawIssue {
  path: (string | number)[];
  message: string;
  fix: string;
}

/**
 * Duplicate provider names across entries and duplicate host names within an entry. Runs on the
 * raw parsed YAML, so duplicates are reported together with every other problem.
 */
export function duplicateNameIssues(raw: unknown): RawIssue[] {
  const providers = isRecord(raw) && Array.isArray(raw.providers) ? (raw.providers as unknown[]) : [];
  const issues = duplicates(providers, ['providers'], 'provider name');
  providers.forEach((entry, i) => {
    if (isRecord(entry) && Array.isArray(entry.hosts)) {
      issues.push(...duplicates(entry.hosts as unknown[], ['providers', i, 'hosts'], 'host name'));
    }
  });
  issues.push(...baseNameClashes(providers));
  return issues;
}

/**
 * Base volumes are named `base-<entry>-<key>.<format>` and identifiers may contain `-`, so entry
 * `lab` with key `a-deb` and entry `lab-a` with key `deb` would share a volume name. Refuse such
 * pairs here, where the fix is cheap (H4: no base is ever shared across entries).
 */
function baseNameClashes(providers: unknown[]): RawIssue[] {
  const seen = new Map<string, string>();
  const issues: RawIssue[] = [];
  providers.forEach((entry, i) => {
    if (!isRecord(entry) || typeof entry.name !== 'string' || !isRecord(entry.images)) return;
    for (const key of Object.keys(entry.images)) {
      const joined = `${entry.name}-${key}`;
      const other = seen.get(joined);
      if (other !== undefined && other !== `${entry.name}/${key}`) {
        issues.push({
          path: ['providers', i, 'images', key],
          message: `entry "${entry.name}" with image key "${key}" names the same base volume (base-${joined}) as ${other}`,
          fix: 'rename the image key or the entry so that "<entry>-<key>" differs between them',
        });
      } else seen.set(joined, `${entry.name}/${key}`);
    }
  });
  return issues;
}

function duplicates(items: unknown[], at: (string | number)[], what: string): RawIssue[] {
  const first = new Map<string, number>();
  const issues: RawIssue[] = [];
  items.forEach((item, i) => {
    const name = isRecord(item) ? item.name : undefined;
    if (typeof name !== 'string') return;
    const prev = first.get(name);
    if (prev === undefined) {
      first.set(name, i);
      return;
    }
    const where = `${at
      .map((s) => (typeof s === 'number' ? `[${s}]` : s))
      .join('.')
      .replaceAll('.[', '[')}[${prev}]`;
    issues.push({
      path: [...at, i, 'name'],
      message: `duplicate ${what} "${name}" (already used at ${where})`,
      fix: `give each ${what === 'host name' ? 'host of the entry' : 'provider entry'} a different name`,
    });
  });
  return issues;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
