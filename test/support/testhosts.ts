/**
 * Test hosts made by test/hosts/testhost: their descriptors, a local path to each host's libvirt
 * socket (through the holder process's mount namespace), and a way to run a command inside a host.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import type { HostTarget } from '../../lib/hostlink/link.ts';
import { loadTesthostDescriptors, TESTHOST_STATE } from '../../dev/testhost-providers.ts';
import type { TesthostDescriptor } from '../../dev/testhost-providers.ts';

const pexecFile = promisify(execFile);

/** A test host's descriptor as the tests read it: the providers file's fields and the rest. */
export interface TestHost extends TesthostDescriptor {
  /** The process holding the host's namespaces (for nsenter and /proc/<pid>/root paths). */
  holderPid: number;
  /** `qemu+ssh://` URI for virsh (through the state root's ssh wrapper). */
  virshUri: string;
  /** `qemu+libssh://` URI for virsh with known_hosts checked, where libvirt has libssh. */
  virshLibsshUri?: string;
  [key: string]: unknown;
}

export { TESTHOST_STATE };

/** Every test host that `testhost up` described; throws with the remedy when there are none. */
export function loadTestHosts(): TestHost[] {
  return loadTesthostDescriptors<TestHost>(TESTHOST_STATE);
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

/**
 * Removes what provider entry `entry` left on the host: its domains (destroyed, undefined) and every
 * volume that mentions it (overlays, seeds, the base and its marker). Errors are ignored: for
 * teardown after a run, which may have removed some of it already. Returns what is still there.
 */
export async function removeEntryLeftovers(host: TestHost, entry: string): Promise<string[]> {
  for (const d of await domainsOf(host, entry).catch(() => [])) {
    await virsh(host, 'destroy', d).catch(() => '');
    await virsh(host, 'undefine', d).catch(() => '');
  }
  for (const v of await volumesOf(host, entry).catch(() => [])) {
    await virsh(host, 'vol-delete', '--pool', host.pool, v).catch(() => '');
  }
  return [
    ...(await domainsOf(host, entry).catch(() => [])).map((x) => `domain ${x}`),
    ...(await volumesOf(host, entry).catch(() => [])).map((x) => `volume ${x}`),
  ];
}
