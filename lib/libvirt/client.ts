/**
 * The typed libvirt API over one LibvirtConnection: the handshake, then one method per procedure
 * the provider uses. Each method takes `{ timeoutMs, signal }`.
 */
import type { Duplex } from 'node:stream';
import { AuthType, DrvFeature, Proc, procName } from './constants.ts';
import { LibvirtConnection } from './connection.ts';
import type { CallOptions, ConnectionOptions } from './connection.ts';
import type { KeepaliveOptions } from './keepalive.ts';
import { LibvirtAuthUnsupportedError, LibvirtProtocolError } from './errors.ts';
import * as P from './protocol.ts';
import type { DhcpLease, Domain, DomainInterface, Network, Schema, StoragePool, StorageVol } from './protocol.ts';
import { downloadStream } from './vol-download.ts';
import type { DownloadOptions } from './vol-download.ts';
import { uploadStream } from './upload.ts';
import type { UploadOptions, UploadResult, UploadSource } from './upload.ts';

export interface ClientOptions extends ConnectionOptions {
  /** URI passed to CONNECT_OPEN. Default `qemu:///system`. */
  uri?: string;
  /** Keepalive settings, or `false` to leave it off. Started only if the daemon supports it. */
  keepalive?: KeepaliveOptions | false;
  /** Budget of each handshake call, in ms. Default 10000. */
  handshakeTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface PoolInfo {
  state: number;
  capacity: bigint;
  allocation: bigint;
  available: bigint;
}

export interface VolInfo {
  type: number;
  capacity: bigint;
  allocation: bigint;
}

export interface NodeInfo {
  /** CPU model, e.g. `x86_64`. */
  model: string;
  /** Physical memory in KiB. */
  memoryKiB: bigint;
  /** Active CPUs. */
  cpus: number;
  mhz: number;
  nodes: number;
  sockets: number;
  cores: number;
  threads: number;
}

export interface DomainInfo {
  state: number;
  /** The most memory the domain may use, in KiB. */
  maxMemKiB: bigint;
  /** The memory it has now (after ballooning), in KiB. */
  memoryKiB: bigint;
  vcpus: number;
  cpuTimeNs: bigint;
}

/** VIR_NODE_MEMORY_STATS_ALL_CELLS: the whole host rather than one NUMA cell. */
export const ALL_CELLS = -1;

export interface DomainStateInfo {
  state: number;
  reason: number;
}

export interface VolUploadOptions extends UploadOptions {
  /** Byte offset in the volume. Default 0. */
  offset?: bigint;
  /** Bytes to write; 0 means up to the end of the source. Default 0. */
  length?: bigint;
}

/**
 * Replies that carry what a guest reports (agent interface data, DHCP leases), bounded far below
 * the packet maximum: a proxy VM has a NIC or two and one lease, while 32 MiB of small records
 * take over a second to decode on the event loop every host shares. A larger reply fails that call
 * with LibvirtProtocolError (Transient) and leaves the connection up.
 */
export const REPLY_MAX_BYTES: ReadonlyMap<number, number> = new Map([
  [Proc.DOMAIN_INTERFACE_ADDRESSES, 1024 * 1024],
  [Proc.NETWORK_GET_DHCP_LEASES, 1024 * 1024],
]);

/** A libvirt client speaking the remote protocol over a duplex byte stream. */
export class LibvirtClient {
  readonly connection: LibvirtConnection;

  constructor(connection: LibvirtConnection) {
    this.connection = connection;
  }

  /**
   * Wraps `transport` and performs the handshake: AUTH_LIST (none, or polkit via AUTH_POLKIT), CONNECT_OPEN,
   * CONNECT_SUPPORTS_FEATURE(keepalive), then starts keepalive. On any failure the transport is
   * destroyed and the error rethrown.
   */
  static async connect(transport: Duplex, options: ClientOptions = {}): Promise<LibvirtClient> {
    const conn = new LibvirtConnection(transport, options);
    const client = new LibvirtClient(conn);
    const call: CallOptions = { timeoutMs: options.handshakeTimeoutMs ?? 10_000, signal: options.signal };
    try {
      const { types } = await client.#call(Proc.AUTH_LIST, P.empty, undefined, P.authListRet, call);
      if (types.length > 0 && !types.includes(AuthType.NONE) && !types.includes(AuthType.POLKIT)) {
        throw new LibvirtAuthUnsupportedError(
          `${conn.label}: the daemon requires authentication types [${types.join(', ')}]; only none and polkit are supported: allow the SSH user on the unix socket (unix_sock_rw_perms / polkit rule)`,
        );
      }
      // Polkit is not implied: the daemon refuses CONNECT_OPEN until AUTH_POLKIT has succeeded.
      if (types.length > 0 && !types.includes(AuthType.NONE)) {
        await client.#call(Proc.AUTH_POLKIT, P.empty, undefined, P.authPolkitRet, call);
      }
      await client.#call(
        Proc.CONNECT_OPEN,
        P.connectOpenArgs,
        { name: options.uri ?? 'qemu:///system', flags: 0 },
        P.empty,
        call,
      );
      if (options.keepalive !== false) {
        const { supported } = await client.#call(
          Proc.CONNECT_SUPPORTS_FEATURE,
          P.supportsFeatureArgs,
          { feature: DrvFeature.PROGRAM_KEEPALIVE },
          P.supportsFeatureRet,
          call,
        );
        if (supported === 1) conn.startKeepalive(options.keepalive);
      }
      return client;
    } catch (err) {
      conn.kill(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
  }

  /** Sends CONNECT_CLOSE (bounded) and destroys the transport. Never throws. */
  async close(options: CallOptions = {}): Promise<void> {
    if (this.connection.isDead) return;
    try {
      await this.#call(Proc.CONNECT_CLOSE, P.empty, undefined, P.empty, { timeoutMs: 2000, ...options });
    } catch {
      // the connection is going away either way
    }
    this.connection.kill(new Error('closed by the client'));
  }

  async #call<A, R>(proc: number, args: Schema<A>, value: A, ret: Schema<R>, options: CallOptions = {}): Promise<R> {
    const body = args === P.empty ? new Uint8Array(0) : args.encode(value);
    const reply = await this.connection.call(proc, body, options);
    const maxBytes = REPLY_MAX_BYTES.get(proc);
    if (maxBytes !== undefined && reply.length > maxBytes) {
      // Refused before decoding (decoding 32 MiB of small records blocks the loop for a second).
      throw new LibvirtProtocolError(
        `${this.connection.label}: ${procName(proc)} reply of ${reply.length} bytes is over its ${maxBytes}-byte bound`,
      );
    }
    try {
      return ret.decode(reply);
    } catch (err) {
      const e = new LibvirtProtocolError(
        `${this.connection.label}: malformed reply body for procedure ${proc}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
      this.connection.kill(e);
      throw e;
    }
  }

  // --- connection ---------------------------------------------------------------------------
  async getVersion(o?: CallOptions): Promise<bigint> {
    return (await this.#call(Proc.CONNECT_GET_VERSION, P.empty, undefined, P.getVersionRet, o)).hv_ver;
  }
  async getLibVersion(o?: CallOptions): Promise<bigint> {
    return (await this.#call(Proc.CONNECT_GET_LIB_VERSION, P.empty, undefined, P.getLibVersionRet, o)).lib_ver;
  }

  // --- node ---------------------------------------------------------------------------------
  async nodeGetInfo(o?: CallOptions): Promise<NodeInfo> {
    const r = await this.#call(Proc.NODE_GET_INFO, P.empty, undefined, P.nodeGetInfoRet, o);
    const end = r.model.indexOf(0);
    const model = String.fromCharCode(...(end < 0 ? r.model : r.model.slice(0, end)).map((c) => c & 0xff));
    const { cpus, mhz, nodes, sockets, cores, threads } = r;
    return { model, memoryKiB: r.memory, cpus, mhz, nodes, sockets, cores, threads };
  }
  /**
   * The host's memory figures in KiB by name (`total`, `free`, `buffers`, `cached` on Linux):
   * asks for their count first, as the daemon refuses any other count.
   */
  async nodeGetMemoryStats(cellNum = ALL_CELLS, o?: CallOptions): Promise<Map<string, bigint>> {
    const ask = (nparams: number) =>
      this.#call(
        Proc.NODE_GET_MEMORY_STATS,
        P.nodeGetMemoryStatsArgs,
        { nparams, cellNum, flags: 0 },
        P.nodeGetMemoryStatsRet,
        o,
      );
    const { nparams } = await ask(0);
    if (nparams <= 0) return new Map();
    const { params } = await ask(nparams);
    return new Map(params.map((p) => [p.field, p.value]));
  }

  // --- domains ------------------------------------------------------------------------------
  async domainLookupByName(name: string, o?: CallOptions): Promise<Domain> {
    return (await this.#call(Proc.DOMAIN_LOOKUP_BY_NAME, P.nameArgs, { name }, P.domainRet, o)).dom;
  }
  async domainLookupByUuid(uuid: Uint8Array, o?: CallOptions): Promise<Domain> {
    return (await this.#call(Proc.DOMAIN_LOOKUP_BY_UUID, P.uuidArgs, { uuid }, P.domainRet, o)).dom;
  }
  async domainDefineXml(xml: string, flags = 0, o?: CallOptions): Promise<Domain> {
    if (flags === 0) return (await this.#call(Proc.DOMAIN_DEFINE_XML, P.xmlArgs, { xml }, P.domainRet, o)).dom;
    return (await this.#call(Proc.DOMAIN_DEFINE_XML_FLAGS, P.xmlFlagsArgs, { xml, flags }, P.domainRet, o)).dom;
  }
  async domainGetXmlDesc(dom: Domain, flags = 0, o?: CallOptions): Promise<string> {
    return (await this.#call(Proc.DOMAIN_GET_XML_DESC, P.domainFlagsArgs, { dom, flags }, P.xmlRet, o)).xml;
  }
  async domainCreate(dom: Domain, flags = 0, o?: CallOptions): Promise<Domain> {
    if (flags === 0) {
      await this.#call(Proc.DOMAIN_CREATE, P.domainArgs, { dom }, P.empty, o);
      return dom;
    }
    return (await this.#call(Proc.DOMAIN_CREATE_WITH_FLAGS, P.domainFlagsArgs, { dom, flags }, P.domainRet, o)).dom;
  }
  async domainDestroy(dom: Domain, flags = 0, o?: CallOptions): Promise<void> {
    if (flags === 0) await this.#call(Proc.DOMAIN_DESTROY, P.domainArgs, { dom }, P.empty, o);
    else await this.#call(Proc.DOMAIN_DESTROY_FLAGS, P.domainFlagsArgs, { dom, flags }, P.empty, o);
  }
  /** Asks the guest to shut down (ACPI or agent); returns at once. */
  async domainShutdown(dom: Domain, o?: CallOptions): Promise<void> {
    await this.#call(Proc.DOMAIN_SHUTDOWN, P.domainArgs, { dom }, P.empty, o);
  }
  async domainUndefine(dom: Domain, flags = 0, o?: CallOptions): Promise<void> {
    if (flags === 0) await this.#call(Proc.DOMAIN_UNDEFINE, P.domainArgs, { dom }, P.empty, o);
    else await this.#call(Proc.DOMAIN_UNDEFINE_FLAGS, P.domainFlagsArgs, { dom, flags }, P.empty, o);
  }
  async domainGetInfo(dom: Domain, o?: CallOptions): Promise<DomainInfo> {
    const r = await this.#call(Proc.DOMAIN_GET_INFO, P.domainArgs, { dom }, P.domainGetInfoRet, o);
    return { state: r.state, maxMemKiB: r.maxMem, memoryKiB: r.memory, vcpus: r.nrVirtCpu, cpuTimeNs: r.cpuTime };
  }
  async domainGetState(dom: Domain, o?: CallOptions): Promise<DomainStateInfo> {
    return this.#call(Proc.DOMAIN_GET_STATE, P.domainFlagsArgs, { dom, flags: 0 }, P.domainGetStateRet, o);
  }
  async domainSetMetadata(
    dom: Domain,
    m: { type: number; metadata: string | null; key: string | null; uri: string | null; flags?: number },
    o?: CallOptions,
  ): Promise<void> {
    await this.#call(
      Proc.DOMAIN_SET_METADATA,
      P.domainSetMetadataArgs,
      { dom, type: m.type, metadata: m.metadata, key: m.key, uri: m.uri, flags: m.flags ?? 0 },
      P.empty,
      o,
    );
  }
  async domainGetMetadata(
    dom: Domain,
    m: { type: number; uri: string | null; flags?: number },
    o?: CallOptions,
  ): Promise<string> {
    return (
      await this.#call(
        Proc.DOMAIN_GET_METADATA,
        P.domainGetMetadataArgs,
        { dom, type: m.type, uri: m.uri, flags: m.flags ?? 0 },
        P.domainGetMetadataRet,
        o,
      )
    ).metadata;
  }
  async domainInterfaceAddresses(dom: Domain, source: number, o?: CallOptions): Promise<DomainInterface[]> {
    return (
      await this.#call(
        Proc.DOMAIN_INTERFACE_ADDRESSES,
        P.domainInterfaceAddressesArgs,
        { dom, source, flags: 0 },
        P.domainInterfaceAddressesRet,
        o,
      )
    ).ifaces;
  }
  async listAllDomains(flags = 0, o?: CallOptions): Promise<Domain[]> {
    return (
      await this.#call(Proc.CONNECT_LIST_ALL_DOMAINS, P.listAllArgs, { need_results: 1, flags }, P.listAllDomainsRet, o)
    ).domains;
  }

  // --- networks -----------------------------------------------------------------------------
  async networkLookupByName(name: string, o?: CallOptions): Promise<Network> {
    return (await this.#call(Proc.NETWORK_LOOKUP_BY_NAME, P.nameArgs, { name }, P.networkRet, o)).net;
  }
  async networkGetDhcpLeases(net: Network, mac: string | null = null, o?: CallOptions): Promise<DhcpLease[]> {
    return (
      await this.#call(
        Proc.NETWORK_GET_DHCP_LEASES,
        P.networkGetDhcpLeasesArgs,
        { net, mac, need_results: 1, flags: 0 },
        P.networkGetDhcpLeasesRet,
        o,
      )
    ).leases;
  }

  // --- storage pools ------------------------------------------------------------------------
  async storagePoolLookupByName(name: string, o?: CallOptions): Promise<StoragePool> {
    return (await this.#call(Proc.STORAGE_POOL_LOOKUP_BY_NAME, P.nameArgs, { name }, P.poolRet, o)).pool;
  }
  async storagePoolGetInfo(pool: StoragePool, o?: CallOptions): Promise<PoolInfo> {
    return this.#call(Proc.STORAGE_POOL_GET_INFO, P.poolArgs, { pool }, P.poolGetInfoRet, o);
  }
  async storagePoolRefresh(pool: StoragePool, o?: CallOptions): Promise<void> {
    await this.#call(Proc.STORAGE_POOL_REFRESH, P.poolFlagsArgs, { pool, flags: 0 }, P.empty, o);
  }
  async listAllStoragePools(flags = 0, o?: CallOptions): Promise<StoragePool[]> {
    return (
      await this.#call(
        Proc.CONNECT_LIST_ALL_STORAGE_POOLS,
        P.listAllArgs,
        { need_results: 1, flags },
        P.listAllPoolsRet,
        o,
      )
    ).pools;
  }
  async storagePoolListAllVolumes(pool: StoragePool, o?: CallOptions): Promise<StorageVol[]> {
    return (
      await this.#call(
        Proc.STORAGE_POOL_LIST_ALL_VOLUMES,
        P.poolListAllVolumesArgs,
        { pool, need_results: 1, flags: 0 },
        P.poolListAllVolumesRet,
        o,
      )
    ).vols;
  }

  // --- storage volumes ----------------------------------------------------------------------
  async storageVolCreateXml(pool: StoragePool, xml: string, flags = 0, o?: CallOptions): Promise<StorageVol> {
    return (await this.#call(Proc.STORAGE_VOL_CREATE_XML, P.volCreateXmlArgs, { pool, xml, flags }, P.volRet, o)).vol;
  }
  async storageVolLookupByName(pool: StoragePool, name: string, o?: CallOptions): Promise<StorageVol> {
    return (await this.#call(Proc.STORAGE_VOL_LOOKUP_BY_NAME, P.volLookupByNameArgs, { pool, name }, P.volRet, o)).vol;
  }
  async storageVolGetInfo(vol: StorageVol, o?: CallOptions): Promise<VolInfo> {
    return this.#call(Proc.STORAGE_VOL_GET_INFO, P.volArgs, { vol }, P.volGetInfoRet, o);
  }
  async storageVolGetPath(vol: StorageVol, o?: CallOptions): Promise<string> {
    return (await this.#call(Proc.STORAGE_VOL_GET_PATH, P.volArgs, { vol }, P.volGetPathRet, o)).name;
  }
  async storageVolDelete(vol: StorageVol, flags = 0, o?: CallOptions): Promise<void> {
    await this.#call(Proc.STORAGE_VOL_DELETE, P.volFlagsArgs, { vol, flags }, P.empty, o);
  }
  /** Reads a small volume whole (STORAGE_VOL_DOWNLOAD), at most `maxBytes` (default 1 MiB). */
  async storageVolDownload(
    vol: StorageVol,
    o: DownloadOptions & { offset?: bigint; length?: bigint } = {},
  ): Promise<Buffer> {
    const body = P.volUploadArgs.encode({ vol, offset: o.offset ?? 0n, length: o.length ?? 0n, flags: 0 });
    return downloadStream(this.connection, Proc.STORAGE_VOL_DOWNLOAD, body, o);
  }
  /** Streams `source` into `vol` (STORAGE_VOL_UPLOAD); resolves after the daemon confirms. */
  async storageVolUpload(vol: StorageVol, source: UploadSource, o: VolUploadOptions = {}): Promise<UploadResult> {
    const body = P.volUploadArgs.encode({ vol, offset: o.offset ?? 0n, length: o.length ?? 0n, flags: 0 });
    return uploadStream(this.connection, Proc.STORAGE_VOL_UPLOAD, body, source, o);
  }
}
