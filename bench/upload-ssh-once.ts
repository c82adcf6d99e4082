/**
 * One upload by our client over SSH (a `dedicated('bulk')` link of lib/hostlink/pool.ts: dial, forward
 * the host's libvirt socket, handshake, STORAGE_VOL_UPLOAD, confirmed finish), in a process of its
 * own so that its memory and CPU figures are its own. Prints one JSON line: seconds (dial to
 * confirmed finish), bytes, idle and peak RSS in bytes, user and system CPU seconds of this
 * process over the same span, and the negotiated cipher. Used by bench/lib/upload-ssh-rounds.ts.
 *
 *   node bench/upload-ssh-once.ts --host 0 --vol NAME --file PATH [--chunk BYTES] [--read-bytes BYTES] [--cipher NAME]
 *       [--stock-ssh2]
 */
import { parseArgs } from 'node:util';
import { HostLinks } from '../lib/hostlink/pool.ts';
import { hostTarget, loadTestHosts } from '../test/support/testhosts.ts';
import { printOnceResult, requireOptions, startSpan, UPLOAD_OPTIONS, uploadInput } from './lib/upload-child.ts';

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '0' },
    ...UPLOAD_OPTIONS,
    cipher: { type: 'string', default: 'aes128-gcm@openssh.com' },
    'stock-ssh2': { type: 'boolean', default: false },
  },
});
requireOptions(values, ['vol', 'file']);
const h = loadTestHosts()[Number(values.host)];
if (!h) throw new Error(`no test host ${values.host}`);

const links = new HostLinks(hostTarget(h), {
  dial: { ciphers: [values.cipher], stockSsh2Writes: values['stock-ssh2'] },
});

const span = startSpan();
const link = await links.dedicated('bulk');
const pool = await link.client.storagePoolLookupByName(h.pool);
const vol = await link.client.storageVolLookupByName(pool, values.vol!);
const { chunks, chunkBytes } = uploadInput(values);
const res = await link.client.storageVolUpload(vol, chunks, { chunkBytes });
const figures = span.end();
const cipher = link.session.negotiated?.cipher;
await link.close();
links.close();
printOnceResult(figures, res.bytes, values.file!, { cipher });
