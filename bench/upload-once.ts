/**
 * One upload by our client, in a process of its own so that its memory figures are its own.
 * Prints one JSON line: seconds (connect + handshake + upload + confirmed finish), idle and peak
 * RSS in bytes, user and system CPU seconds over the same span. Used by bench/lib/upload-ssh-rounds.ts.
 *
 *   node bench/upload-once.ts --socket PATH --pool NAME --vol NAME --file PATH [--chunk BYTES] [--read-bytes BYTES]
 */
import net from 'node:net';
import { parseArgs } from 'node:util';
import { LibvirtClient } from '../lib/libvirt/client.ts';
import { printOnceResult, requireOptions, startSpan, UPLOAD_OPTIONS, uploadInput } from './lib/upload-child.ts';

const { values } = parseArgs({
  options: {
    socket: { type: 'string' },
    pool: { type: 'string' },
    ...UPLOAD_OPTIONS,
  },
});
requireOptions(values, ['socket', 'pool', 'vol', 'file']);

const span = startSpan();
const sock = net.connect(values.socket!);
await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
const client = await LibvirtClient.connect(sock);
const pool = await client.storagePoolLookupByName(values.pool!);
const vol = await client.storageVolLookupByName(pool, values.vol!);
const { chunks, chunkBytes } = uploadInput(values);
const res = await client.storageVolUpload(vol, chunks, { chunkBytes });
const figures = span.end();
await client.close();
printOnceResult(figures, res.bytes, values.file!);
