/**
 * XDR schemas of the remote_protocol.x structures this client uses. Pure data: no I/O.
 */
import {
  array,
  fixedArray,
  int32,
  int64,
  opaque,
  option,
  struct,
  uint32,
  uint64,
  utf8String,
  voidType,
} from '../xdr/index.ts';
import type { Infer, XdrType } from '../xdr/index.ts';
import { Limits, ListMax } from './constants.ts';

export const nonnullString = utf8String(Limits.STRING_MAX);
export const remoteString = option(nonnullString);
export const remoteUuid = opaque(16);
export const empty = voidType();

export const nonnullDomain = struct('remote_nonnull_domain', { name: nonnullString, uuid: remoteUuid, id: int32() });
export const nonnullNetwork = struct('remote_nonnull_network', { name: nonnullString, uuid: remoteUuid });
export const nonnullStoragePool = struct('remote_nonnull_storage_pool', { name: nonnullString, uuid: remoteUuid });
export const nonnullStorageVol = struct('remote_nonnull_storage_vol', {
  pool: nonnullString,
  name: nonnullString,
  key: nonnullString,
});
export type Domain = Infer<typeof nonnullDomain>;
export type Network = Infer<typeof nonnullNetwork>;
export type StoragePool = Infer<typeof nonnullStoragePool>;
export type StorageVol = Infer<typeof nonnullStorageVol>;

export const remoteError = struct('remote_error', {
  code: int32(),
  domain: int32(),
  message: remoteString,
  level: int32(),
  dom: option(nonnullDomain),
  str1: remoteString,
  str2: remoteString,
  str3: remoteString,
  int1: int32(),
  int2: int32(),
  net: option(nonnullNetwork),
});
export type RemoteError = Infer<typeof remoteError>;

// --- connection -------------------------------------------------------------------------------
export const authListRet = struct('remote_auth_list_ret', { types: array(int32(), ListMax.AUTH_TYPE) });
export const authPolkitRet = struct('remote_auth_polkit_ret', { complete: int32() });
export const connectOpenArgs = struct('remote_connect_open_args', { name: remoteString, flags: uint32() });
export const supportsFeatureArgs = struct('remote_connect_supports_feature_args', { feature: int32() });
export const supportsFeatureRet = struct('remote_connect_supports_feature_ret', { supported: int32() });
export const getVersionRet = struct('remote_connect_get_version_ret', { hv_ver: uint64() });
export const getLibVersionRet = struct('remote_connect_get_lib_version_ret', { lib_ver: uint64() });

// --- node -------------------------------------------------------------------------------------
/** `char model[32]`: rpcgen sends each char in a whole four-byte word. */
export const nodeGetInfoRet = struct('remote_node_get_info_ret', {
  model: fixedArray(int32(), 32),
  memory: uint64(), // KiB
  cpus: int32(),
  mhz: int32(),
  nodes: int32(),
  sockets: int32(),
  cores: int32(),
  threads: int32(),
});
export const nodeGetMemoryStatsArgs = struct('remote_node_get_memory_stats_args', {
  nparams: int32(),
  cellNum: int32(),
  flags: uint32(),
});
export const nodeMemoryStat = struct('remote_node_get_memory_stats', { field: nonnullString, value: uint64() });
export const nodeGetMemoryStatsRet = struct('remote_node_get_memory_stats_ret', {
  params: array(nodeMemoryStat, ListMax.NODE_MEMORY_STATS),
  nparams: int32(),
});

// --- domains ----------------------------------------------------------------------------------
export const domainArgs = struct('remote_domain_args', { dom: nonnullDomain });
export const domainFlagsArgs = struct('remote_domain_flags_args', { dom: nonnullDomain, flags: uint32() });
export const domainRet = struct('remote_domain_ret', { dom: nonnullDomain });
export const nameArgs = struct('remote_name_args', { name: nonnullString });
export const uuidArgs = struct('remote_uuid_args', { uuid: remoteUuid });
export const xmlArgs = struct('remote_xml_args', { xml: nonnullString });
export const xmlFlagsArgs = struct('remote_xml_flags_args', { xml: nonnullString, flags: uint32() });
export const xmlRet = struct('remote_xml_ret', { xml: nonnullString });
/** `unsigned char state` and `unsigned short nrVirtCpu` each take a whole word on the wire. */
export const domainGetInfoRet = struct('remote_domain_get_info_ret', {
  state: uint32(),
  maxMem: uint64(), // KiB
  memory: uint64(), // KiB
  nrVirtCpu: uint32(),
  cpuTime: uint64(),
});
export const domainGetStateRet = struct('remote_domain_get_state_ret', { state: int32(), reason: int32() });
export const domainSetMetadataArgs = struct('remote_domain_set_metadata_args', {
  dom: nonnullDomain,
  type: int32(),
  metadata: remoteString,
  key: remoteString,
  uri: remoteString,
  flags: uint32(),
});
export const domainGetMetadataArgs = struct('remote_domain_get_metadata_args', {
  dom: nonnullDomain,
  type: int32(),
  uri: remoteString,
  flags: uint32(),
});
export const domainGetMetadataRet = struct('remote_domain_get_metadata_ret', { metadata: nonnullString });
export const listAllArgs = struct('remote_connect_list_all_args', { need_results: int32(), flags: uint32() });
export const listAllDomainsRet = struct('remote_connect_list_all_domains_ret', {
  domains: array(nonnullDomain, ListMax.DOMAIN),
  ret: uint32(),
});
export const domainIpAddr = struct('remote_domain_ip_addr', { type: int32(), addr: nonnullString, prefix: uint32() });
export const domainInterface = struct('remote_domain_interface', {
  name: nonnullString,
  hwaddr: remoteString,
  addrs: array(domainIpAddr, ListMax.DOMAIN_IP_ADDR),
});
export type DomainInterface = Infer<typeof domainInterface>;
export const domainInterfaceAddressesArgs = struct('remote_domain_interface_addresses_args', {
  dom: nonnullDomain,
  source: uint32(),
  flags: uint32(),
});
export const domainInterfaceAddressesRet = struct('remote_domain_interface_addresses_ret', {
  ifaces: array(domainInterface, ListMax.DOMAIN_INTERFACE),
});

// --- networks ---------------------------------------------------------------------------------
export const networkRet = struct('remote_network_ret', { net: nonnullNetwork });
export const networkDhcpLease = struct('remote_network_dhcp_lease', {
  iface: nonnullString,
  expirytime: int64(),
  type: int32(),
  mac: remoteString,
  iaid: remoteString,
  ipaddr: nonnullString,
  prefix: uint32(),
  hostname: remoteString,
  clientid: remoteString,
});
export type DhcpLease = Infer<typeof networkDhcpLease>;
export const networkGetDhcpLeasesArgs = struct('remote_network_get_dhcp_leases_args', {
  net: nonnullNetwork,
  mac: remoteString,
  need_results: int32(),
  flags: uint32(),
});
export const networkGetDhcpLeasesRet = struct('remote_network_get_dhcp_leases_ret', {
  leases: array(networkDhcpLease, ListMax.NETWORK_DHCP_LEASES),
  ret: uint32(),
});

// --- storage pools ----------------------------------------------------------------------------
export const poolArgs = struct('remote_storage_pool_args', { pool: nonnullStoragePool });
export const poolFlagsArgs = struct('remote_storage_pool_flags_args', { pool: nonnullStoragePool, flags: uint32() });
export const poolRet = struct('remote_storage_pool_ret', { pool: nonnullStoragePool });
export const poolGetInfoRet = struct('remote_storage_pool_get_info_ret', {
  state: int32(), // `unsigned char` takes four bytes on the wire
  capacity: uint64(),
  allocation: uint64(),
  available: uint64(),
});
export const listAllPoolsRet = struct('remote_connect_list_all_storage_pools_ret', {
  pools: array(nonnullStoragePool, ListMax.STORAGE_POOL),
  ret: uint32(),
});
export const poolListAllVolumesArgs = struct('remote_storage_pool_list_all_volumes_args', {
  pool: nonnullStoragePool,
  need_results: int32(),
  flags: uint32(),
});
export const poolListAllVolumesRet = struct('remote_storage_pool_list_all_volumes_ret', {
  vols: array(nonnullStorageVol, ListMax.STORAGE_VOL),
  ret: uint32(),
});

// --- storage volumes --------------------------------------------------------------------------
export const volCreateXmlArgs = struct('remote_storage_vol_create_xml_args', {
  pool: nonnullStoragePool,
  xml: nonnullString,
  flags: uint32(),
});
export const volLookupByNameArgs = struct('remote_storage_vol_lookup_by_name_args', {
  pool: nonnullStoragePool,
  name: nonnullString,
});
export const volArgs = struct('remote_storage_vol_args', { vol: nonnullStorageVol });
export const volFlagsArgs = struct('remote_storage_vol_flags_args', { vol: nonnullStorageVol, flags: uint32() });
export const volRet = struct('remote_storage_vol_ret', { vol: nonnullStorageVol });
export const volGetInfoRet = struct('remote_storage_vol_get_info_ret', {
  type: int32(), // `char` takes four bytes on the wire
  capacity: uint64(),
  allocation: uint64(),
});
export const volGetPathRet = struct('remote_storage_vol_get_path_ret', { name: nonnullString });
export const volUploadArgs = struct('remote_storage_vol_upload_args', {
  vol: nonnullStorageVol,
  offset: uint64(),
  length: uint64(),
  flags: uint32(),
});

/** A schema whose value type is `T` (for the typed call helper). */
export type Schema<T> = XdrType<T>;
