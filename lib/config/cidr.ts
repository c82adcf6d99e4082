/** CIDR parsing lives in contracts/cidr.ts (with the open-proxy rule); re-exported for lib/. */
export { parseCidr } from '../../contracts/cidr.ts';
export type { Cidr, CidrResult } from '../../contracts/cidr.ts';
