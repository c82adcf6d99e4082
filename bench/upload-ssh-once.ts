/**
 * One upload by our client over SSH (a `dedicated('bulk')` link of lib/hostlink/pool.ts: dial, forward
 * the host's libvirt socket, handshake, STORAGE_VOL_UPLOAD, confirmed finish), in a process of its
 * own so that its memory and CPU figures are its own. Prints one JSON line: seconds (dial to
 * confirmed finish), bytes, idle and peak RSS in bytes, user and system CPU seconds of this
 * process over the same span, and the negotiated cipher. Used by bench/upload-ssh.ts.
 *
 *   node bench/upload-ssh-once.ts --host 0 --vol NAME --file PATH [--chunk BYTES] [--read-bytes BYTES] [--cipher NAME]
 *       [--stock-ssh2]
 */
import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { HostLinks } from '../lib/hostlink/pool.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import { fileChunks } from './file-chunks.ts';
import { DEFAULT_UPLOAD_CHUNK_BYTES } from '../lib/libvirt/upload.ts';

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '0' },
    vol: { type: 'string' },
    file: { type: 'string' },
    chunk: { type: 'string', default: String(DEFAULT_UPLOAD_CHUNK_BYTES) },
    'read-bytes': { type: 'string', default: String(256 * 1024) },
    source: { type: 'string', default: 'sync' },
    cipher: { type: 'string', default: 'aes128-gcm@openssh.com' },
    'stock-ssh2': { type: 'boolean', default: false },
  },
});
for (const k of ['vol', 'file'] as const) {
  if (!values[k]) throw new Error(`--${k} is required`);
}
const h = loadTestHosts()[Number(values.host)];
if (!h) throw new Error(`no test host ${values.host}`);

const links = new HostLinks(hostTarget(h), {
  dial: { ciphers: [values.cipher], stockSsh2Writes: values['stock-ssh2'] },
});

let peak = process.memoryUsage.rss();
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage.rss());
}, 10);
const idle = process.memoryUsage.rss();
const cpu0 = process.cpuUsage();
const started = performance.now();
const link = await links.dedicated('bulk');
const pool = await link.client.storagePoolLookupByName(h.pool);
const vol = await link.client.storageVolLookupByName(pool, values.vol!);
const size = statSync(values.file!).size;
const res = await link.client.storageVolUpload(
  vol,
  fileChunks(values.file!, Number(values['read-bytes']), values.source === 'async' ? 'async' : 'sync'),
  {
    chunkBytes: Number(values.chunk),
  },
);
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpu0);
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage.rss());
const cipher = link.session.negotiated?.cipher;
await link.close();
links.close();
if (res.bytes !== size) throw new Error(`uploaded ${res.bytes} of ${size} bytes`);
process.stdout.write(
  JSON.stringify({
    seconds,
    bytes: res.bytes,
    // ms since this process started: when the timed span began, and when this line was written.
    startedMs: started,
    endMs: performance.now(),
    idleRss: idle,
    peakRss: peak,
    maxRssKiB: process.resourceUsage().maxRSS,
    cpuUserS: cpu.user / 1e6,
    cpuSystemS: cpu.system / 1e6,
    cipher,
  }) + '\n',
);
