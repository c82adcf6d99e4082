/**
 * The kvm2 provider's public surface: what activities, workers and the CLI import. Inner files
 * are the provider's own; import from here.
 */
export { createProxy } from './create.ts';
export type { CreateProxyInput, CreatedProxy } from './create.ts';
export { deleteProxy } from './delete.ts';
export type { DeleteProxyInput, DeletedProxy, Outcome } from './delete.ts';
export { getProxy, listProxies } from './inspect.ts';
export type { GetProxyInput, ProxyStatus, ListedProxy } from './inspect.ts';
export type { AddressReading, AddressSourceName } from './addresses.ts';
export type { ProxyVmState } from './state.ts';
export { ensureImage, PROGRESS_INTERVAL_MS } from './images.ts';
export type { EnsureImageInput, EnsuredImage, ImageProgress, ImageSpec, ImageTimeouts } from './images.ts';
export { hostHealth, versionString } from './health.ts';
export type { HostHealth } from './health.ts';
export { hostLinksOptions, hostTarget } from './targets.ts';
export { proxyObjectNames } from './proxy-names.ts';
export type { ProxyIdentity, ProxyObjectNames } from './proxy-names.ts';
export { baseVolumeName, checkIdentifier, isIdentifier, markerVolumeName } from './names.ts';
export type { ImageFormat } from './names.ts';
export * from './errors.ts';
