/**
 * What a new link costs, step by step: the SSH dial (TCP, key exchange, authentication), the
 * channel to libvirt's socket, and the libvirt handshake (AUTH_LIST, CONNECT_OPEN, the keepalive
 * feature check), for `--dials` dials in a row to one test host, alternating between our session
 * as it is and with ssh2's stock behaviour (`stockSsh2Writes`: no packet pool, no prompt
 * acknowledgement of sshd's host-keys proof, lib/ssh/prompt-ack.ts). Prints one line per dial and
 * the medians. Not a test.
 *
 *   node bench/dial-steps.ts [--host 0] [--dials 8]
 */
import { parseArgs } from 'node:util';
import { LibvirtClient } from '../lib/libvirt/client.ts';
import { dialSsh } from '../lib/ssh/dial.ts';
import { DEFAULT_LIBVIRT_SOCKET } from '../lib/rules.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import { median, spread } from './lib/stats.ts';

const { values } = parseArgs({
  options: { host: { type: 'string', default: '0' }, dials: { type: 'string', default: '8' } },
});
const h = loadTestHosts()[Number(values.host)];
if (!h) throw new Error(`no test host ${values.host}`);
const target = hostTarget(h);
const dials = Number(values.dials);
const rows: Record<string, { dial: number; open: number; libvirt: number }[]> = { ours: [], stock: [] };

for (let i = 0; i < 2 * dials; i++) {
  const variant = i % 2 === 0 ? 'ours' : 'stock';
  const t0 = performance.now();
  const s = await dialSsh(target, { ciphers: ['aes128-gcm@openssh.com'], stockSsh2Writes: variant === 'stock' });
  const t1 = performance.now();
  const ch = await s.openStreamLocal(target.socketPath ?? DEFAULT_LIBVIRT_SOCKET, { timeoutMs: 5_000 });
  const t2 = performance.now();
  const c = await LibvirtClient.connect(ch, { uri: target.uri, label: 'dial-steps' });
  const t3 = performance.now();
  const row = { dial: t1 - t0, open: t2 - t1, libvirt: t3 - t2 };
  rows[variant]!.push(row);
  console.log(
    `${variant.padEnd(5)} dial ${row.dial.toFixed(1)} ms, channel open ${row.open.toFixed(1)} ms, libvirt handshake ${row.libvirt.toFixed(1)} ms, IGNOREs sent ${s.promptAcks}`,
  );
  await c.close({ timeoutMs: 1_000 });
  s.kill(new Error('done'));
}
for (const [variant, r] of Object.entries(rows)) {
  const total = r.map((x) => x.dial + x.open + x.libvirt);
  const slow = r.filter((x) => x.open + x.libvirt > 30).length;
  const t = spread(total);
  console.log(
    `${variant}: median dial ${median(r.map((x) => x.dial)).toFixed(1)} ms, open + handshake ${median(r.map((x) => x.open + x.libvirt)).toFixed(1)} ms, ` +
      `total ${t.med.toFixed(1)} ms (${t.min.toFixed(1)}-${t.max.toFixed(1)}); open + handshake over 30 ms in ${slow} of ${r.length}`,
  );
}
