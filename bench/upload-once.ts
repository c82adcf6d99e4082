/**
 * One upload by our client, in a process of its own so that its memory figures are its own.
 * Prints one JSON line: seconds (connect + handshake + upload + confirmed finish), idle and peak
 * RSS in bytes, user and system CPU seconds over the same span. Used by bench/upload-local.ts and bench/upload-ssh.ts.
 *
 *   node bench/upload-once.ts --socket PATH --pool NAME --vol NAME --file PATH [--chunk BYTES] [--read-bytes BYTES]
 */
import { statSync } from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { LibvirtClient } from '../lib/libvirt/client.ts';
import { fileChunks } from './file-chunks.ts';
import { DEFAULT_UPLOAD_CHUNK_BYTES } from '../lib/libvirt/upload.ts';

const { values } = parseArgs({
  options: {
    socket: { type: 'string' },
    pool: { type: 'string' },
    vol: { type: 'string' },
    file: { type: 'string' },
    chunk: { type: 'string', default: String(DEFAULT_UPLOAD_CHUNK_BYTES) },
    'read-bytes': { type: 'string', default: String(256 * 1024) },
    source: { type: 'string', default: 'sync' },
  },
});
for (const k of ['socket', 'pool', 'vol', 'file'] as const) {
  if (!values[k]) throw new Error(`--${k} is required`);
}

let peak = process.memoryUsage.rss();
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage.rss());
}, 10);
const idle = process.memoryUsage.rss();
const cpu0 = process.cpuUsage();
const started = performance.now();
const sock = net.connect(values.socket!);
await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
const client = await LibvirtClient.connect(sock);
const pool = await client.storagePoolLookupByName(values.pool!);
const vol = await client.storageVolLookupByName(pool, values.vol!);
const size = statSync(values.file!).size;
const res = await client.storageVolUpload(
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
await client.close();
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
  }) + '\n',
);
