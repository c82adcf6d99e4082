/**
 * The kvm2 provider's public surface: what activities, workers and the CLI import. Inner files
 * are the provider's own; import from here.
 */
export { createProxy, proxySeedSpec } from './proxy/create.ts';
export type { CreateProxyInput, CreatedProxy } from './proxy/create.ts';
export { deleteProxy } from './proxy/delete.ts';
export type { DeleteProxyInput, DeletedProxy, Outcome } from './proxy/delete.ts';
export { getProxy, listProxies } from './proxy/inspect.ts';
export type { GetProxyInput, VmStatus, ListedProxy } from './proxy/inspect.ts';
export type { AddressReading, AddressSourceName } from './proxy/addresses.ts';
export type { ProxyVmState } from './proxy/vm-state.ts';
export { ensureImage, findImage, PROGRESS_INTERVAL_MS } from './images/ensure.ts';
export type { EnsureImageInput, EnsuredImage, ImageProgress, ImageSpec, ImageTimeouts } from './images/ensure.ts';
export { hostHealth, versionString } from './health.ts';
export type { HostHealth } from './health.ts';
export { hostCapacity } from './capacity.ts';
export type { HostCapacity } from './capacity.ts';
export { hostLinksOptions, hostTarget } from './host-transport.ts';
export { proxyObjectNames } from './proxy/object-names.ts';
export type { ProxyIdentity, ProxyObjectNames } from './proxy/object-names.ts';
export { baseVolumeName, markerVolumeName } from './images/base-names.ts';
export { checkIdentifier } from './identifier.ts';
export { isIdentifier } from '../rules.ts';
export type { ImageFormat } from './images/base-names.ts';
export * from './errors.ts';
export { resizeProxy } from './proxy/resize.ts';
export type { ResizeProxyInput, ResizedProxy } from './proxy/resize.ts';
export { readConsoleTail, CONSOLE_TAIL_MAX_BYTES } from './proxy/console.ts';
export { removeProxyLogs, proxyLogPaths } from './proxy/console.ts';
export type { RemovedLogs } from './proxy/console.ts';
export { deleteOrphanVolumes, listOrphanVolumes } from './proxy/orphan-volumes.ts';
export type { OrphanVolumes } from './proxy/orphan-volumes.ts';
export { parseProxyVolumeName } from './proxy/object-names.ts';
