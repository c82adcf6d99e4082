// IPv4/IPv6 CIDR blocks and the open-proxy rule, written once for the providers file, the API and
// the proxy activities. Pure and synchronous; no imports, so every layer imports it alike.
//
// A prefix with host bits set (`10.0.0.1/8`) is refused with its canonical form, because Squid
// silently masks it and the operator probably meant something else. Addresses are written strictly
// (dotted quads without leading zeros, RFC 4291 IPv6 text without a zone): `0/0` is not a block.

/** A parsed CIDR block. */
export interface Cidr {
  family: 4 | 6;
  /** The address bytes (4 or 16), host bits as written. */
  bytes: Uint8Array;
  prefixLength: number;
  /** The network with host bits cleared, in canonical text form (`10.0.0.0/8`, `2001:db8::/32`). */
  canonical: string;
}

/** The result of {@link parseCidr}: the block, or why the text is not one. */
export type CidrResult = { ok: true; cidr: Cidr } | { ok: false; problem: string; canonical?: string };

/** Parses `address/prefix` (IPv4 or IPv6, prefix required); refuses host bits below the prefix. */
export function parseCidr(text: string): CidrResult {
  const slash = text.indexOf('/');
  if (slash < 0) return { ok: false, problem: 'is not a CIDR block (no "/prefix")' };
  const addr = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  const v4 = ipv4Bytes(addr);
  const bytes = v4 ?? ipv6Bytes(addr);
  if (bytes === undefined) return { ok: false, problem: `"${addr}" is not an IPv4 or IPv6 address` };
  const family = v4 === undefined ? 6 : 4;
  const maxPrefix = family === 4 ? 32 : 128;
  if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > maxPrefix) {
    return { ok: false, problem: `prefix length "${prefixText}" is not a number from 0 to ${maxPrefix}` };
  }
  const prefixLength = Number(prefixText);
  const network = maskBytes(bytes, prefixLength);
  const canonical = `${formatAddress(family, network)}/${prefixLength}`;
  if (network.some((b, i) => b !== bytes[i])) {
    return { ok: false, problem: `has host bits set below the /${prefixLength} prefix`, canonical };
  }
  return { ok: true, cidr: { family, bytes, prefixLength, canonical } };
}

/**
 * Whether the blocks together admit every address of a family: Squid with such an ACL is an open
 * proxy. Squid sees IPv4 clients as IPv4-mapped IPv6 addresses, so IPv6 blocks count for IPv4
 * where they overlap `::ffff:0.0.0.0/96`: that block alone is open, and so is any IPv6 block
 * holding it (`::/0`, `::/1`). Every list that covers all of IPv6 covers that block too, so one
 * check, all of IPv4, finds both families; and it finds sets such as `0.0.0.0/1` + `128.0.0.0/1`
 * as well as single blocks. Texts that are not blocks are ignored here: {@link parseCidr} refuses
 * them.
 */
export function coversEverything(cidrs: readonly string[]): boolean {
  const ipv4: Range[] = [];
  for (const text of cidrs) {
    const parsed = parseCidr(text);
    if (!parsed.ok) continue;
    const { family, bytes, prefixLength } = parsed.cidr;
    const start = bytes.reduce((n, b) => (n << 8n) | BigInt(b), 0n);
    const end = start + (1n << BigInt(bytes.length * 8 - prefixLength)) - 1n;
    if (family === 4) {
      ipv4.push([start, end]);
      continue;
    }
    const from = start > V4_MAPPED ? start : V4_MAPPED;
    const to = end < V4_MAPPED + V4_LAST ? end : V4_MAPPED + V4_LAST;
    if (from <= to) ipv4.push([from - V4_MAPPED, to - V4_MAPPED]);
  }
  return coversAll(ipv4, V4_LAST);
}

/** A block that makes an allowed-clients list an open proxy, and why, in words for an error. */
export interface OpenBlock {
  /** Its index in the list. */
  index: number;
  /** `admits every address`, or what it admits with the blocks before it. */
  problem: string;
}

/**
 * The blocks of `cidrs` that make an open proxy (see {@link coversEverything}): each block that
 * does on its own; or, when none does but the list does, the block that completes the coverage.
 * Empty when the list is not an open proxy.
 */
export function openBlocks(cidrs: readonly string[]): OpenBlock[] {
  if (!coversEverything(cidrs)) return [];
  const alone = cidrs.flatMap((c, index) => {
    if (!coversEverything([c])) return [];
    return [{ index, problem: c.endsWith('/0') ? 'admits every address' : 'admits every IPv4 address' }];
  });
  if (alone.length > 0) return alone;
  const index = cidrs.findIndex((_, i) => coversEverything(cidrs.slice(0, i + 1)));
  return [{ index, problem: `with ${cidrs.slice(0, index).join(', ')} before it admits every IPv4 address` }];
}

const V4_LAST = 0xffff_ffffn;
/** `::ffff:0.0.0.0`: where IPv4-mapped IPv6 addresses start. */
const V4_MAPPED = 0xffffn << 32n;

/** An inclusive range of addresses as numbers. */
type Range = [bigint, bigint];

/** Whether the ranges together cover every number from 0 to `last`. */
function coversAll(ranges: Range[], last: bigint): boolean {
  let next = 0n;
  for (const [start, end] of [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    if (start > next) return false;
    if (end >= next) next = end + 1n;
    if (next > last) return true;
  }
  return false;
}

/** The 4 bytes of a dotted quad (no leading zeros), or undefined. */
function ipv4Bytes(text: string): Uint8Array | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) {
    return undefined;
  }
  return Uint8Array.from(parts.map(Number));
}

/** The 16 bytes of an IPv6 address (`::` once at most, an IPv4 tail allowed, no zone), or undefined. */
function ipv6Bytes(text: string): Uint8Array | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (half: string, last: boolean): number[] | undefined => {
    if (half === '') return [];
    const out: number[] = [];
    const parts = half.split(':');
    for (const [i, p] of parts.entries()) {
      if (/^[0-9A-Fa-f]{1,4}$/.test(p)) out.push(parseInt(p, 16));
      else if (last && i === parts.length - 1) {
        // An embedded IPv4 tail (::ffff:192.0.2.1) is the last two groups.
        const v4 = ipv4Bytes(p);
        if (v4 === undefined) return undefined;
        out.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      } else return undefined;
    }
    return out;
  };
  const head = groupsOf(halves[0] ?? '', halves.length === 1);
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? '', true) : [];
  if (head === undefined || tail === undefined) return undefined;
  const given = head.length + tail.length;
  if (halves.length === 2 ? given > 7 : given !== 8) return undefined;
  const groups = [...head, ...Array<number>(8 - given).fill(0), ...tail];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

function maskBytes(bytes: Uint8Array, prefixLength: number): Uint8Array {
  return bytes.map((b, i) => {
    const bits = Math.max(0, Math.min(8, prefixLength - i * 8));
    return b & ((0xff << (8 - bits)) & 0xff);
  });
}

function formatAddress(family: 4 | 6, bytes: Uint8Array): string {
  if (family === 4) return Array.from(bytes).join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  // RFC 5952: compress the longest run (length >= 2) of zero groups, the first one on a tie.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [bestStart, bestLen] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/**
 * Destinations a proxy refuses unless the policy allows them explicitly (docs/egress-policy.md):
 * addresses that reach the proxy itself, its host, its network or a cloud's metadata service
 * rather than the internet. No block lies inside another, so Squid takes the list as written.
 * IPv4-mapped IPv6 forms (`::ffff:10.0.0.1`) are covered too: Squid keeps every IPv4 address in
 * that form and matches an IPv4 block against both; {@link reservedBlockOf} does the same.
 */
export const RESERVED_DESTINATIONS: readonly { cidr: string; what: string }[] = [
  { cidr: '0.0.0.0/8', what: '"this network" (0.0.0.0/8)' },
  { cidr: '10.0.0.0/8', what: 'private network (RFC 1918)' },
  { cidr: '100.64.0.0/10', what: 'carrier-grade NAT (RFC 6598)' },
  { cidr: '127.0.0.0/8', what: 'loopback' },
  { cidr: '169.254.0.0/16', what: 'link-local, cloud metadata (169.254.169.254)' },
  { cidr: '172.16.0.0/12', what: 'private network (RFC 1918)' },
  { cidr: '192.0.0.0/24', what: 'IETF protocol assignments (RFC 6890)' },
  { cidr: '192.168.0.0/16', what: 'private network (RFC 1918)' },
  { cidr: '198.18.0.0/15', what: 'benchmarking networks (RFC 2544)' },
  { cidr: '224.0.0.0/4', what: 'multicast' },
  { cidr: '240.0.0.0/4', what: 'reserved, broadcast' },
  { cidr: '::/128', what: 'IPv6 unspecified' },
  { cidr: '::1/128', what: 'IPv6 loopback' },
  { cidr: 'fc00::/7', what: 'IPv6 unique local (ULA)' },
  { cidr: 'fe80::/10', what: 'IPv6 link-local' },
  { cidr: 'ff00::/8', what: 'IPv6 multicast' },
];

/** Whether block `outer` holds every address of block `inner` (IPv4 inside IPv4-mapped IPv6 counts). */
export function blockCovers(outer: Cidr, inner: Cidr): boolean {
  const [o, i] = [asIpv6(outer), asIpv6(inner)];
  if (o.prefixLength > i.prefixLength) return false;
  const masked = maskBytes(i.bytes, o.prefixLength);
  return masked.every((b, k) => b === o.bytes[k]);
}

/**
 * The reserved block ({@link RESERVED_DESTINATIONS}) that holds `address` (an IPv4 or IPv6
 * address, IPv4-mapped forms included), or undefined for a public address or a text that is not
 * an address.
 */
export function reservedBlockOf(address: string): { cidr: string; what: string } | undefined {
  const bytes = ipv4Bytes(address) ?? ipv6Bytes(address);
  if (bytes === undefined) return undefined;
  const single = parseCidr(`${address}/${bytes.length * 8}`);
  if (!single.ok) return undefined;
  return RESERVED_DESTINATIONS.find((r) => {
    const block = parseCidr(r.cidr);
    return block.ok && blockCovers(block.cidr, single.cidr);
  });
}

/** `cidr` as an IPv6 block: IPv4 blocks become their IPv4-mapped form (`::ffff:a.b.c.d/96+n`). */
function asIpv6(cidr: Cidr): { bytes: Uint8Array; prefixLength: number } {
  if (cidr.family === 6) return { bytes: maskBytes(cidr.bytes, cidr.prefixLength), prefixLength: cidr.prefixLength };
  const bytes = new Uint8Array(16);
  bytes[10] = 0xff;
  bytes[11] = 0xff;
  bytes.set(maskBytes(cidr.bytes, cidr.prefixLength), 12);
  return { bytes, prefixLength: cidr.prefixLength + 96 };
}
