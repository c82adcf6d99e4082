/** The configuration module: the providers file schema, its loader and its error. */
export { ConfigError, formatIssue, ProxySpecError } from './errors.ts';
export { imageOf } from './lookup.ts';
export { resolveSquid } from './squid.ts';
export { basicProxyAuthorization, readHtpasswd, readProbeCredentials } from './htpasswd.ts';
export { DEFAULT_ALLOW_PORTS, MAIL_PORTS } from './egress.ts';
export type { ConfigErrorCode, ConfigIssue } from './errors.ts';
export { loadProvidersFile, parseProvidersYaml, formatPath, MAX_PROVIDERS_FILE_BYTES } from './load.ts';
export {
  coversEverything,
  openBlocks,
  parseCidr,
  RESERVED_DESTINATIONS,
  reservedBlockOf,
} from '../../contracts/cidr.ts';
export type { Cidr, CidrResult, OpenBlock } from '../../contracts/cidr.ts';
export { IDENTIFIER_RE, MAX_TIMEOUT_MS, ProvidersFileSchema } from './schema.ts';
export type {
  HostConfig,
  ImageConfig,
  ProviderEntry,
  ProvidersConfig,
  SquidConfig,
  TimeoutsConfig,
  VmConfig,
} from './schema.ts';
