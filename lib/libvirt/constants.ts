/**
 * Wire constants of libvirt's remote RPC protocol (src/rpc/virnetprotocol.x,
 * src/remote/remote_protocol.x, include/libvirt/virterror.h). Named, never bare numbers.
 */

/** Program numbers. */
export const Program = {
  REMOTE: 0x20008086,
  KEEPALIVE: 0x6b656570,
} as const;

export const REMOTE_PROTOCOL_VERSION = 1;
export const KEEPALIVE_PROTOCOL_VERSION = 1;

/** virNetMessageType */
export const MessageType = {
  CALL: 0,
  REPLY: 1,
  MESSAGE: 2,
  STREAM: 3,
  CALL_WITH_FDS: 4,
  REPLY_WITH_FDS: 5,
  STREAM_HOLE: 6,
} as const;
export type MessageTypeValue = (typeof MessageType)[keyof typeof MessageType];

/** virNetMessageStatus */
export const MessageStatus = {
  OK: 0,
  ERROR: 1,
  CONTINUE: 2,
} as const;
export type MessageStatusValue = (typeof MessageStatus)[keyof typeof MessageStatus];

/** Keepalive procedures. */
export const KeepaliveProc = {
  PING: 1,
  PONG: 2,
} as const;

/** Sizes from virnetprotocol.x. */
export const Limits = {
  /** The length word that starts every packet. */
  LEN_SIZE: 4,
  /** prog, vers, proc, type, serial, status: six 32-bit words. */
  HEADER_SIZE: 24,
  /** Largest whole message (header plus payload) newer daemons accept: 32 MiB. */
  MESSAGE_MAX: 33554432,
  /** Largest whole message older daemons (before 5.x) accept: 16 MiB. */
  MESSAGE_MAX_LEGACY: 16777216,
  /** Payload bound of stream packets for daemons that predate large messages. */
  LEGACY_PAYLOAD_MAX: 262120,
  /** REMOTE_STRING_MAX of current libvirt. */
  STRING_MAX: 4194304,
} as const;

/** Smallest legal packet: the length word plus the header, no body. */
export const MIN_PACKET_SIZE = Limits.LEN_SIZE + Limits.HEADER_SIZE;
/** Largest legal packet length (the length word counts itself). */
export const MAX_PACKET_SIZE = Limits.LEN_SIZE + Limits.MESSAGE_MAX;

/** List bounds from remote_protocol.x. */
export const ListMax = {
  AUTH_TYPE: 20,
  DOMAIN: 16384,
  STORAGE_POOL: 4096,
  STORAGE_VOL: 16384,
  DOMAIN_INTERFACE: 2048,
  DOMAIN_IP_ADDR: 2048,
  NETWORK_DHCP_LEASES: 65536,
  NODE_MEMORY_STATS: 16,
} as const;

/** remote_auth_type */
export const AuthType = {
  NONE: 0,
  SASL: 1,
  POLKIT: 2,
} as const;

/** Procedure numbers of the remote program that this client speaks. */
export const Proc = {
  CONNECT_OPEN: 1,
  CONNECT_CLOSE: 2,
  CONNECT_GET_VERSION: 4,
  NODE_GET_INFO: 6,
  DOMAIN_CREATE: 9,
  DOMAIN_DEFINE_XML: 11,
  DOMAIN_DESTROY: 12,
  DOMAIN_GET_XML_DESC: 14,
  DOMAIN_GET_INFO: 16,
  DOMAIN_LOOKUP_BY_NAME: 23,
  DOMAIN_LOOKUP_BY_UUID: 24,
  DOMAIN_SHUTDOWN: 33,
  DOMAIN_UNDEFINE: 35,
  NETWORK_LOOKUP_BY_NAME: 46,
  CONNECT_SUPPORTS_FEATURE: 60,
  AUTH_LIST: 66,
  AUTH_POLKIT: 70,
  STORAGE_POOL_REFRESH: 83,
  STORAGE_POOL_LOOKUP_BY_NAME: 84,
  STORAGE_POOL_GET_INFO: 87,
  STORAGE_VOL_CREATE_XML: 93,
  STORAGE_VOL_DELETE: 94,
  STORAGE_VOL_LOOKUP_BY_NAME: 95,
  STORAGE_VOL_GET_INFO: 98,
  STORAGE_VOL_GET_PATH: 100,
  CONNECT_GET_LIB_VERSION: 157,
  DOMAIN_CREATE_WITH_FLAGS: 196,
  STORAGE_VOL_UPLOAD: 208,
  STORAGE_VOL_DOWNLOAD: 209,
  DOMAIN_GET_STATE: 212,
  NODE_GET_MEMORY_STATS: 228,
  DOMAIN_UNDEFINE_FLAGS: 231,
  DOMAIN_DESTROY_FLAGS: 234,
  DOMAIN_SET_METADATA: 264,
  DOMAIN_GET_METADATA: 265,
  CONNECT_LIST_ALL_DOMAINS: 273,
  CONNECT_LIST_ALL_STORAGE_POOLS: 281,
  STORAGE_POOL_LIST_ALL_VOLUMES: 282,
  NETWORK_GET_DHCP_LEASES: 341,
  DOMAIN_DEFINE_XML_FLAGS: 350,
  DOMAIN_INTERFACE_ADDRESSES: 353,
} as const;
export type ProcName = keyof typeof Proc;

const procNames = new Map<number, ProcName>(Object.entries(Proc).map(([k, v]) => [v, k as ProcName]));
/** Name of a remote procedure number, for logs and errors. */
export function procName(proc: number): string {
  return procNames.get(proc) ?? `PROC_${proc}`;
}

/** virDrvFeature values used with CONNECT_SUPPORTS_FEATURE. */
export const DrvFeature = {
  PROGRAM_KEEPALIVE: 10,
} as const;

/** virDomainState */
export const DomainState = {
  NOSTATE: 0,
  RUNNING: 1,
  BLOCKED: 2,
  PAUSED: 3,
  SHUTDOWN: 4,
  SHUTOFF: 5,
  CRASHED: 6,
  PMSUSPENDED: 7,
} as const;

/** virDomainInterfaceAddressesSource */
export const AddressSource = {
  LEASE: 0,
  AGENT: 1,
  ARP: 2,
} as const;

/** virIPAddrType */
export const IpAddrType = {
  IPV4: 0,
  IPV6: 1,
} as const;

/** virDomainMetadataType */
export const MetadataType = {
  DESCRIPTION: 0,
  TITLE: 1,
  ELEMENT: 2,
} as const;

/** virDomainModificationImpact, used by metadata calls. */
export const DomainAffect = {
  CURRENT: 0,
  LIVE: 1,
  CONFIG: 2,
} as const;

/** virDomainUndefineFlagsValues */
export const UndefineFlags = {
  MANAGED_SAVE: 1,
  SNAPSHOTS_METADATA: 2,
  NVRAM: 4,
  KEEP_NVRAM: 8,
  CHECKPOINTS_METADATA: 16,
  TPM: 32,
  KEEP_TPM: 64,
} as const;

/** virDomainDestroyFlagsValues */
export const DestroyFlags = {
  DEFAULT: 0,
  GRACEFUL: 1,
  REMOVE_LOGS: 2,
} as const;

/** virDomainXMLFlags (subset) */
export const DomainXmlFlags = {
  /** The persistent (inactive) definition rather than the running one. */
  INACTIVE: 2,
} as const;

/** virConnectListAllDomainsFlags (subset) */
export const ListDomainsFlags = {
  ACTIVE: 1,
  INACTIVE: 2,
  PERSISTENT: 4,
  TRANSIENT: 8,
} as const;

/** virStorageVolCreateFlags */
export const VolCreateFlags = {
  PREALLOC_METADATA: 1,
  REFLINK: 2,
  VALIDATE: 4,
} as const;

/** virStoragePoolState */
export const StoragePoolState = {
  INACTIVE: 0,
  BUILDING: 1,
  RUNNING: 2,
  DEGRADED: 3,
  INACCESSIBLE: 4,
} as const;

/** virErrorNumber values the project names (virterror.h). */
export const ErrorNumber = {
  OK: 0,
  INTERNAL_ERROR: 1,
  NO_MEMORY: 2,
  NO_SUPPORT: 3,
  UNKNOWN_HOST: 4,
  NO_CONNECT: 5,
  INVALID_CONN: 6,
  INVALID_DOMAIN: 7,
  INVALID_ARG: 8,
  OPERATION_FAILED: 9,
  GET_FAILED: 10,
  POST_FAILED: 11,
  HTTP_ERROR: 12,
  SEXPR_SERIAL: 13,
  NO_XEN: 14,
  XEN_CALL: 15,
  OS_TYPE: 16,
  NO_KERNEL: 17,
  NO_ROOT: 18,
  NO_SOURCE: 19,
  NO_TARGET: 20,
  NO_NAME: 21,
  NO_OS: 22,
  NO_DEVICE: 23,
  NO_XENSTORE: 24,
  DRIVER_FULL: 25,
  CALL_FAILED: 26,
  XML_ERROR: 27,
  DOM_EXIST: 28,
  OPERATION_DENIED: 29,
  OPEN_FAILED: 30,
  READ_FAILED: 31,
  PARSE_FAILED: 32,
  CONF_SYNTAX: 33,
  WRITE_FAILED: 34,
  XML_DETAIL: 35,
  INVALID_NETWORK: 36,
  NETWORK_EXIST: 37,
  SYSTEM_ERROR: 38,
  RPC: 39,
  GNUTLS_ERROR: 40,
  NO_DOMAIN: 42,
  NO_NETWORK: 43,
  INVALID_MAC: 44,
  AUTH_FAILED: 45,
  INVALID_STORAGE_POOL: 46,
  INVALID_STORAGE_VOL: 47,
  NO_STORAGE_POOL: 49,
  NO_STORAGE_VOL: 50,
  OPERATION_INVALID: 55,
  NO_INTERFACE: 57,
  MULTIPLE_INTERFACES: 59,
  NO_SECRET: 66,
  CONFIG_UNSUPPORTED: 67,
  OPERATION_TIMEOUT: 68,
  MIGRATE_PERSIST_FAILED: 69,
  HOOK_SCRIPT_FAILED: 70,
  INVALID_STREAM: 73,
  ARGUMENT_UNSUPPORTED: 74,
  STORAGE_PROBE_FAILED: 75,
  STORAGE_POOL_BUILT: 76,
  SNAPSHOT_REVERT_RISKY: 77,
  OPERATION_ABORTED: 78,
  AUTH_CANCELLED: 79,
  NO_DOMAIN_METADATA: 80,
  MIGRATE_UNSAFE: 81,
  OVERFLOW: 82,
  BLOCK_COPY_ACTIVE: 83,
  OPERATION_UNSUPPORTED: 84,
  SSH: 85,
  AGENT_UNRESPONSIVE: 86,
  RESOURCE_BUSY: 87,
  ACCESS_DENIED: 88,
  DBUS_SERVICE: 89,
  STORAGE_VOL_EXIST: 90,
  CPU_INCOMPATIBLE: 91,
  XML_INVALID_SCHEMA: 92,
  MIGRATE_FINISH_OK: 93,
  AUTH_UNAVAILABLE: 94,
  NO_SERVER: 95,
  NO_CLIENT: 96,
  AGENT_UNSYNCED: 97,
  LIBSSH: 98,
  DEVICE_MISSING: 99,
  INVALID_NWFILTER_BINDING: 100,
  NO_NWFILTER_BINDING: 101,
  INVALID_DOMAIN_CHECKPOINT: 102,
  NO_DOMAIN_CHECKPOINT: 103,
  NO_DOMAIN_BACKUP: 104,
  INVALID_NETWORK_PORT: 105,
  NETWORK_PORT_EXIST: 106,
  NO_NETWORK_PORT: 107,
  NO_HOSTNAME: 108,
  CHECKPOINT_INCONSISTENT: 109,
  MULTIPLE_DOMAINS: 110,
  NO_NETWORK_METADATA: 111,
} as const;

const errorNames = new Map<number, string>(Object.entries(ErrorNumber).map(([k, v]) => [v, k]));
/** Name of a virErrorNumber, for messages. */
export function errorName(code: number): string {
  return errorNames.get(code) ?? `ERR_${code}`;
}
