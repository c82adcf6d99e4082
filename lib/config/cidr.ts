/**
 * IPv4/IPv6 CIDR parsing for the providers file and for the Squid ACLs built from it. Pure and
 * synchronous. A prefix with host bits set (`10.0.0.1/8`) is refused with its canonical form,
 * because Squid silently masks it and the operator probably meant something else.
 */
import { isIPv4, isIPv6 } from 'node:net';

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
  let bytes: Uint8Array;
  let family: 4 | 6;
  if (isIPv4(addr)) {
    family = 4;
    bytes = Uint8Array.from(addr.split('.').map(Number));
  } else if (isIPv6(addr) && !addr.includes('%')) {
    family = 6;
    bytes = ipv6Bytes(addr);
  } else {
    return { ok: false, problem: `"${addr}" is not an IPv4 or IPv6 address` };
  }
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

function ipv6Bytes(addr: string): Uint8Array {
  let text = addr;
  const out = new Uint8Array(16);
  // An embedded IPv4 tail (::ffff:192.0.2.1) becomes two hextets.
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = rest === undefined || rest === '' ? [] : rest.split(':');
  const zeros = 8 - headParts.length - tailParts.length;
  const groups = [...headParts, ...Array<string>(rest === undefined ? 0 : zeros).fill('0'), ...tailParts];
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    out[i * 2] = v >> 8;
    out[i * 2 + 1] = v & 0xff;
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
