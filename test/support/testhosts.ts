/**
 * Test hosts made by test/hosts/testhost: their descriptors, a local path to each host's libvirt
 * socket (through the holder process's mount namespace), and a way to run a command inside a host.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { HostTarget } from '../../lib/hostlink/link.ts';

const pexecFile = promisify(execFile);

export interface TestHost {
  name: string;
  address: string;
  port: number;
  user: string;
  keyPath: string;
  knownHostsPath: string;
  socketPath: string;
  pool: string;
  network: string;
  domainType: 'kvm' | 'qemu';
  holderPid: number;
  [key: string]: unknown;
}

export const TESTHOST_STATE = process.env.EP_TESTHOST_STATE ?? '/var/lib/egress-proxies-testhosts';

/** Every test host that `testhost up` described; throws with the remedy when there are none. */
export function loadTestHosts(): TestHost[] {
  let index: unknown;
  try {
    index = JSON.parse(readFileSync(join(TESTHOST_STATE, 'hosts.json'), 'utf8'));
  } catch (err) {
    throw new Error(
      `no test hosts under ${TESTHOST_STATE} (${(err as Error).message}): run 'test/hosts/testhost up' first`,
    );
  }
  const list = Array.isArray(index) ? index : ((index as { hosts?: unknown[] }).hosts ?? []);
  return list.map((entry) => {
    const path =
      typeof entry === 'string'
        ? entry
        : ((entry as { descriptor?: string; path?: string }).descriptor ?? (entry as { path: string }).path);
    return JSON.parse(readFileSync(path.startsWith('/') ? path : join(TESTHOST_STATE, path), 'utf8')) as TestHost;
  });
}

/** The host's libvirt socket as seen from the root mount namespace. */
export function localSocketPath(host: TestHost): string {
  return typeof host.localSocketPath === 'string'
    ? host.localSocketPath
    : `/proc/${host.holderPid}/root${host.socketPath}`;
}

/** A file inside the host's mount namespace, as seen from here. */
export function hostPath(host: TestHost, path: string): string {
  return `/proc/${host.holderPid}/root${path}`;
}

/** Opens a unix-socket connection to the host's libvirtd (bounded by `timeoutMs`). */
export function connectLocalSocket(host: TestHost, timeoutMs = 5000): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(localSocketPath(host));
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`connecting to ${localSocketPath(host)} took over ${timeoutMs} ms`));
    }, timeoutMs);
    sock.once('connect', () => {
      clearTimeout(timer);
      resolve(sock);
    });
    sock.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** Runs a command inside the host's mount and network namespaces. */
export async function inHost(host: TestHost, argv: string[], timeoutMs = 30_000): Promise<string> {
  const { stdout } = await pexecFile('nsenter', ['-t', String(host.holderPid), '-m', '-n', '--', ...argv], {
    timeout: timeoutMs,
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout;
}

/** The transport's view of a test host: where to dial, as whom, and where libvirt listens. */
export function hostTarget(host: TestHost): HostTarget {
  return {
    name: host.name,
    host: host.address,
    port: host.port,
    user: host.user,
    keyPath: host.keyPath,
    knownHostsPath: host.knownHostsPath,
    socketPath: host.socketPath,
  };
}

/** Runs `virsh -q` against the host's own libvirtd (inside its namespaces). */
export function virsh(host: TestHost, ...args: string[]): Promise<string> {
  return inHost(host, ['virsh', '-q', '-c', 'qemu:///system', ...args]);
}

/** The names of the host's domains of provider entry `entry` (`ep_<entry>_*`). */
export async function domainsOf(host: TestHost, entry: string): Promise<string[]> {
  return (await virsh(host, 'list', '--all', '--name')).split('\n').filter((d) => d.startsWith(`ep_${entry}_`));
}

/** The names of the volumes in the host's pool that mention `entry`, sorted. */
export async function volumesOf(host: TestHost, entry: string): Promise<string[]> {
  return (await virsh(host, 'vol-list', host.pool))
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((v) => v.includes(entry))
    .sort();
}
