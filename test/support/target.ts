/**
 * A CONNECT target for end-to-end health checks: a TCP server on a test host's root-side address
 * (reachable from guests through the host's NAT) that records each peer and closes after a
 * greeting, so a test can tell that Squid in the VM really connected out.
 */
import net from 'node:net';

export interface Target {
  port: number;
  /** Remote addresses of the connections seen, in order. */
  peers: string[];
  close(): Promise<void>;
}

export async function startTarget(address: string, greeting = 'hello from the e2e target\n'): Promise<Target> {
  const peers: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    peers.push(sock.remoteAddress ?? '?');
    sockets.add(sock);
    sock.once('close', () => sockets.delete(sock));
    sock.on('error', () => {});
    sock.end(greeting);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    peers,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
