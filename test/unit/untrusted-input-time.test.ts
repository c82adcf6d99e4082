/**
 * Every parser of what hosts and guests send (domain XML and metadata, marker volumes, agent and
 * lease replies, daemon error messages, known_hosts lines) run at its largest accepted input, in
 * shapes chosen to hurt (namespace declarations before many children, deep nesting, runs of
 * padding, tiny records), while the event loop is watched. A worker serves every host from one
 * loop, so a slow parse stalls keepalives and calls on all of them: the longest stall must stay
 * under STALL_BOUND_MS. The parse is synchronous, so the stall it causes is the main thread's CPU
 * time during it: that is what is bounded (process.threadCpuUsage), so other processes on a busy
 * machine (a build beside the tests) cannot make it fail, while a parse that does more work can.
 * The wall-clock stall is reported beside it. The quadratic XML reader this replaced took 25 s of
 * CPU on the first document below.
 */
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { parseMarker, MARKER_MAX_BYTES } from '../../lib/kvm2/images/volumes.ts';
import { parseOwnerMetadata } from '../../lib/kvm2/proxy/domain-xml.ts';
import { usableIpv4 } from '../../lib/kvm2/proxy/addresses.ts';
import { parseXml, XML_MAX_CHARS, XML_MAX_DEPTH } from '../../lib/kvm2/xml.ts';
import { REPLY_MAX_BYTES } from '../../lib/libvirt/client.ts';
import { Limits, Proc } from '../../lib/libvirt/constants.ts';
import { decodeRemoteError } from '../../lib/libvirt/errors.ts';
import { domainInterfaceAddressesRet, networkGetDhcpLeasesRet } from '../../lib/libvirt/protocol.ts';
import { MAX_KNOWN_HOSTS_BYTES } from '../../lib/ssh/credentials.ts';
import { entryMatchesName, parseKnownHosts } from '../../lib/ssh/known-hosts.ts';
import { xdr } from '../support/fake-daemon.ts';

const STALL_BOUND_MS = 500;

/**
 * Runs `parse` (synchronous) while the event loop is watched; returns the main thread's CPU time
 * in the parse and the longest wall-clock stall, both in ms.
 */
async function measure(parse: () => unknown): Promise<{ cpuMs: number; stallMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  await new Promise((r) => setTimeout(r, 20));
  const c0 = process.threadCpuUsage();
  try {
    parse();
  } catch {
    // refusing the input is as good as reading it, as long as it is quick
  }
  const c1 = process.threadCpuUsage(c0);
  await new Promise((r) => setTimeout(r, 20));
  h.disable();
  return { cpuMs: (c1.user + c1.system) / 1000, stallMs: h.max / 1e6 };
}

async function assertQuick(what: string, parse: () => unknown): Promise<void> {
  const { cpuMs, stallMs } = await measure(parse);
  if (process.env.SHOW_STALLS !== undefined) {
    process.stderr.write(`${what}: cpu ${cpuMs.toFixed(1)} ms, stall ${stallMs.toFixed(1)} ms\n`);
  }
  assert.ok(
    cpuMs < STALL_BOUND_MS,
    `${what}: the parse held the event loop for ${cpuMs.toFixed(0)} ms of CPU (wall-clock stall ${stallMs.toFixed(0)} ms)`,
  );
}

/** `head`, then `body` repeated as often as fits, then `tail`: at most `chars` characters. */
function fill(head: string, body: string, tail: string, chars: number): string {
  const room = chars - head.length - tail.length;
  assert.ok(room >= 0);
  return head + body.repeat(Math.floor(room / body.length)) + tail;
}

describe('parsers of untrusted input stay within the stall bound at their largest accepted input', () => {
  it('XML (domain metadata): namespace declarations, children, depth, attributes, entities', async () => {
    const decls = Array.from({ length: 5_000 }, (_, i) => ` xmlns:p${i}='u${i}'`).join('');
    // The shape that took the old reader 25 s (5,000 declarations, then empty children), as large
    // as the reader accepts.
    await assertQuick('5,000 xmlns then empty children', () =>
      parseXml(fill(`<r${decls}>`, '<c/>', '</r>', XML_MAX_CHARS)),
    );
    await assertQuick('5,000 xmlns then prefixed children', () =>
      parseXml(fill(`<r${decls}>`, '<p1:c/>', '</r>', XML_MAX_CHARS)),
    );
    const deep = `${'<a xmlns:q="u">'.repeat(XML_MAX_DEPTH - 2)}<b>`;
    const deepTail = `</b>${'</a>'.repeat(XML_MAX_DEPTH - 2)}`;
    await assertQuick('many prefixed children at the depth limit', () =>
      parseXml(fill(deep, '<q:c q:x="1"/>', deepTail, XML_MAX_CHARS)),
    );
    await assertQuick('one element with as many attributes as fit', () => {
      let i = 0;
      const attrs = fill('', ' a=""', '', XML_MAX_CHARS - 10).replace(/ a=""/g, () => ` a${i++}=""`);
      return parseXml(`<r${attrs.slice(0, XML_MAX_CHARS - 10)}/>`);
    });
    await assertQuick('entities and CDATA in text', () =>
      parseOwnerMetadata(fill('<proxy><owner>', '&amp;&#x41;<![CDATA[x]]>', '</owner></proxy>', XML_MAX_CHARS)),
    );
    await assertQuick('one char over the limit', () => parseXml('<r>' + ' '.repeat(XML_MAX_CHARS) + '</r>'));
  });

  it('marker volumes: padding runs, nesting, long strings', async () => {
    const M = MARKER_MAX_BYTES;
    await assertQuick('spaces then a character', () => parseMarker(' '.repeat(M - 1) + 'x', 'raw'));
    await assertQuick('NULs then a character', () => parseMarker('\0'.repeat(M - 1) + 'x', 'raw'));
    await assertQuick('nested arrays', () => parseMarker('['.repeat(M / 2) + ']'.repeat(M / 2), 'raw'));
    await assertQuick('one long string', () => parseMarker(`{"v":1,"url":"${'x'.repeat(M - 20)}"}`, 'raw'));
  });

  it('agent and lease replies: as many tiny records as the reply bound holds, then address checks', async () => {
    const agentMax = REPLY_MAX_BYTES.get(Proc.DOMAIN_INTERFACE_ADDRESSES)!;
    const addr = xdr.cat(xdr.i32(0), xdr.str('999.1.1.1'), xdr.u32(24));
    const perIface = 2048;
    const iface = xdr.cat(xdr.str('e'), xdr.optStr(null), xdr.u32(perIface), Buffer.concat(Array(perIface).fill(addr)));
    const n = Math.floor((agentMax - 4) / iface.length);
    const agentBody = xdr.cat(xdr.u32(n), Buffer.concat(Array(n).fill(iface)));
    assert.ok(agentBody.length <= agentMax && agentBody.length > agentMax / 2);
    await assertQuick('interface addresses', () => {
      for (const i of domainInterfaceAddressesRet.decode(agentBody).ifaces) for (const a of i.addrs) usableIpv4(a.addr);
    });

    const leaseMax = REPLY_MAX_BYTES.get(Proc.NETWORK_GET_DHCP_LEASES)!;
    const lease = xdr.cat(
      xdr.str('v'),
      xdr.u64(0n),
      xdr.i32(0),
      xdr.optStr(null),
      xdr.optStr(null),
      xdr.str('999.1.1.1'),
      xdr.u32(24),
      xdr.optStr(null),
      xdr.optStr(null),
    );
    const m = Math.floor((leaseMax - 8) / lease.length);
    const leaseBody = xdr.cat(xdr.u32(m), Buffer.concat(Array(m).fill(lease)), xdr.u32(m));
    await assertQuick('DHCP leases', () => {
      for (const l of networkGetDhcpLeasesRet.decode(leaseBody).leases) usableIpv4(l.ipaddr);
    });
  });

  it('daemon error messages: four strings of the largest size', async () => {
    const s = xdr.optStr('x'.repeat(Limits.STRING_MAX));
    const body = xdr.cat(
      xdr.i32(1),
      xdr.i32(0),
      s,
      xdr.i32(2),
      xdr.u32(0),
      s,
      s,
      s,
      xdr.i32(0),
      xdr.i32(0),
      xdr.u32(0),
    );
    await assertQuick('remote_error', () => decodeRemoteError(body, Proc.DOMAIN_LOOKUP_BY_NAME).message.length);
  });

  it('known_hosts: star patterns and long lines up to the file bound, matched against a host name', async () => {
    const blob = xdr.cat(xdr.str('ssh-ed25519'), xdr.u32(32), Buffer.alloc(32, 7)).toString('base64');
    const line = `${'a*'.repeat(2_000)}b,!${'*a'.repeat(2_000)} ssh-ed25519 ${blob}\n`;
    const text = fill('', line, '', MAX_KNOWN_HOSTS_BYTES);
    let parsed = 0;
    await assertQuick('parse and match', () => {
      const { entries } = parseKnownHosts(text);
      parsed = entries.length;
      for (const e of entries) entryMatchesName(e, `${'a'.repeat(250)}.example`);
    });
    assert.ok(parsed > 100, `only ${parsed} entries parsed: the lines must be valid to be matched`);
  });
});
