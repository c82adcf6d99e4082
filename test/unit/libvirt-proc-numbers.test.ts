/**
 * Procedure numbers, typed by hand from libvirt's src/remote/remote_protocol.x (enum
 * remote_procedure), against the constants the client sends. A wrong number calls another
 * procedure on the daemon, so each is checked here rather than trusted.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Proc } from '../../lib/libvirt/constants.ts';

const FROM_REMOTE_PROTOCOL_X: Record<string, number> = {
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
};

it('every procedure the client sends has its number from remote_protocol.x', () => {
  assert.deepEqual({ ...Proc }, FROM_REMOTE_PROTOCOL_X);
});
