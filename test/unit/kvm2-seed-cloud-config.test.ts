/**
 * The seed's text: meta-data, #cloud-config user-data (hostname, the whole squid.conf, guest
 * agent and Squid enabled), network-config v2; parsed back as YAML 1.1 (what cloud-init's PyYAML
 * reads); every value validated; Squid's own parser checks the config where squid is installed.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import YAML from 'yaml';
import {
  EP_SEED_HEADER,
  SQUID_CONF_PATH,
  assertHostnameLabel,
  buildCloudInitSeed,
  buildEpSeed,
  buildMetaData,
  buildNetworkConfig,
  buildSquidConf,
  buildUserData,
  seedWrites,
} from '../../lib/kvm2/seed/cloud-config.ts';
import type { CloudInitSpec } from '../../lib/kvm2/seed/cloud-config.ts';
import { Kvm2BuildError } from '../../lib/kvm2/build-errors.ts';
import { BASIC_AUTH_HELPER, SQUID_USERS_PATH } from '../../lib/kvm2/seed/squid-policy.ts';
import { RESERVED_DESTINATIONS } from '../../contracts/cidr.ts';

const pexec = promisify(execFile);

const SPEC: CloudInitSpec = {
  instanceId: '4dea22b3-1d52-d8f3-2516-782e98ab3fa0',
  hostname: 'ep-lab-a-p1',
  squidPort: 3128,
  allowedClientCidrs: ['10.0.0.0/8', '2001:db8::/32'],
};

const HASH = `$6$abcdefgh$${'x'.repeat(86)}`;
const FULL: CloudInitSpec = {
  ...SPEC,
  egress: {
    mode: 'report',
    allowDestinations: ['10.231.1.1/32', '10.231.0.0/16', '.example.org', 'www.example.org', 'example.org', 'api.test'],
    denyDestinations: ['203.0.113.0/24', 'bad.example.net'],
    allowPorts: ['80', '443', '25', '1024-65535'],
  },
  auth: { realm: 'egress-proxies', users: [{ user: 'alice', hash: HASH }] },
};

const parse11 = (text: string): unknown => YAML.parse(text, { version: '1.1' });

function field(err: unknown): string {
  assert.ok(err instanceof Kvm2BuildError, `expected Kvm2BuildError, got ${String(err)}`);
  assert.equal(err.code, 'KVM2_BUILD_INPUT');
  assert.equal(err.kind, 'Permanent');
  return err.field;
}

function throwsField(fn: () => unknown, want: string): void {
  assert.throws(fn, (err: unknown) => field(err) === want);
}

describe('meta-data', () => {
  it('holds the instance id and local hostname', () => {
    assert.deepEqual(parse11(buildMetaData(SPEC)), {
      'instance-id': '4dea22b3-1d52-d8f3-2516-782e98ab3fa0',
      'local-hostname': 'ep-lab-a-p1',
    });
  });

  it('keeps strings that YAML 1.1 would read as booleans or numbers as strings', () => {
    const meta = parse11(buildMetaData({ instanceId: '0644', hostname: 'yes' })) as Record<string, unknown>;
    assert.equal(meta['instance-id'], '0644');
    assert.equal(meta['local-hostname'], 'yes');
    const user = parse11(buildUserData({ ...SPEC, hostname: 'on' })) as Record<string, unknown>;
    assert.equal(user.hostname, 'on');
  });

  it('refuses instance ids that are not plain tokens', () => {
    for (const bad of ['', 'a b', 'a\nb: c', '-x', 'a'.repeat(129), 'é']) {
      throwsField(() => buildMetaData({ instanceId: bad, hostname: 'h' }), 'instanceId');
    }
  });
});

describe('user-data', () => {
  const text = buildUserData(SPEC);
  const doc = parse11(text) as {
    hostname: string;
    write_files: { path: string; owner: string; permissions: string; content: string }[];
    runcmd: string[];
  };

  it('is a #cloud-config document that sets the hostname', () => {
    assert.equal(text.split('\n')[0], '#cloud-config');
    assert.equal(doc.hostname, 'ep-lab-a-p1');
    assert.equal((doc as unknown as Record<string, unknown>).preserve_hostname, false);
  });

  it('writes the whole squid.conf, root-owned, mode 0644 (a string, not octal 420)', () => {
    assert.equal(doc.write_files.length, 1);
    const wf = doc.write_files[0]!;
    assert.equal(wf.path, SQUID_CONF_PATH);
    assert.equal(wf.owner, 'root:root');
    assert.equal(wf.permissions, '0644');
    assert.equal(wf.content, buildSquidConf(SPEC));
  });

  it("with credentials, writes the users file (hashes only) for Squid's helpers, mode 0640 root:proxy", () => {
    const full = parse11(buildUserData(FULL)) as typeof doc;
    assert.equal(full.write_files.length, 2);
    const users = full.write_files[1]!;
    assert.deepEqual(
      { path: users.path, owner: users.owner, permissions: users.permissions, content: users.content },
      { path: SQUID_USERS_PATH, owner: 'root:proxy', permissions: '0640', content: `alice:${HASH}\n` },
    );
  });

  it('enables the guest agent and squid, and reloads squid only when it started before its config was written', () => {
    assert.deepEqual(doc.runcmd, [
      'systemctl enable qemu-guest-agent || true',
      'systemctl --no-block start qemu-guest-agent || true',
      'systemctl enable squid',
      '[ /run/squid.pid -nt /etc/squid/squid.conf ] || systemctl reload-or-restart squid',
    ]);
  });

  it('refuses a hostname that is not one RFC 1123 label', () => {
    for (const bad of ['', '-a', 'a-', 'a.b', 'a_b', 'a b', 'x'.repeat(64), 'a\n', 'p1\nruncmd: [reboot]', 'ü']) {
      throwsField(() => buildUserData({ ...SPEC, hostname: bad }), 'hostname');
      assert.throws(() => assertHostnameLabel(bad), Kvm2BuildError);
    }
    for (const good of ['a', '0', 'A-9', 'x'.repeat(63)]) assertHostnameLabel(good);
  });
});

describe('squid.conf', () => {
  const conf = buildSquidConf(SPEC);
  const lines = conf.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  const access = (text: string): string[] => text.split('\n').filter((l) => l.startsWith('http_access'));

  it('listens on the port, admits the allowed CIDRs only, and applies the default policy to every method', () => {
    assert.ok(lines.includes('http_port 3128'));
    assert.ok(lines.includes('visible_hostname ep-lab-a-p1'));
    assert.deepEqual(
      lines.filter((l) => l.startsWith('acl ep_clients')),
      ['acl ep_clients src 10.0.0.0/8', 'acl ep_clients src 2001:db8::/32'],
    );
    // No CONNECT-only rule any more: plain HTTP forward requests pass the same rules.
    assert.deepEqual(access(conf), [
      'http_access deny !ep_clients',
      'http_access deny !ep_ports ep_mark_port',
      'http_access deny ep_reserved ep_mark_reserved',
      'http_access allow ep_clients ep_mark_allowed',
      'http_access deny all',
    ]);
    assert.ok(!conf.includes('CONNECT'));
    assert.deepEqual(
      lines.filter((l) => l.startsWith('acl ep_ports')),
      ['acl ep_ports port 80', 'acl ep_ports port 443', 'acl ep_ports port 1024-65535'],
    );
    assert.deepEqual(
      lines.filter((l) => l.startsWith('acl ep_reserved')).map((l) => l.split(' ')[3]),
      RESERVED_DESTINATIONS.map((r) => r.cidr),
    );
    for (const block of ['127.0.0.0/8', '10.0.0.0/8', '169.254.0.0/16', '::1/128', 'fc00::/7', 'fe80::/10']) {
      assert.ok(lines.includes(`acl ep_reserved dst ${block}`), block);
    }
    assert.ok(lines.includes('acl ep_mark_reserved annotate_transaction ep_policy=denied ep_rule=reserved'));
    assert.ok(lines.includes('request_header_access Proxy-Authorization deny all'));
    assert.ok(lines.some((l) => l.startsWith('access_log ') && l.includes('logformat=ep_decision')));
    assert.ok(lines.some((l) => l.startsWith('logformat ep_decision ') && l.includes('policy=%{ep_policy}note')));
    assert.ok(lines.includes('cache deny all'));
    assert.ok(conf.endsWith('\n'));
  });

  it('report mode lets what enforce refuses pass, marked would-deny; allow and deny lists, deduplicated', () => {
    const text = buildSquidConf(FULL);
    const l = text.split('\n');
    assert.deepEqual(access(text), [
      'http_access deny !ep_clients',
      'http_access deny !ep_users',
      'http_access allow !ep_ports ep_mark_port',
      'http_access allow ep_deny_dst ep_mark_denied',
      'http_access allow ep_deny_domain ep_mark_denied',
      'http_access allow ep_reserved !ep_allow_dst !ep_allow_domain ep_mark_reserved',
      'http_access allow ep_clients ep_mark_allowed',
      'http_access deny all',
    ]);
    assert.ok(l.includes('acl ep_mark_reserved annotate_transaction ep_policy=would-deny ep_rule=reserved'));
    assert.deepEqual(
      l.filter((x) => x.startsWith('acl ep_allow_') || x.startsWith('acl ep_deny_')),
      [
        'acl ep_allow_dst dst 10.231.0.0/16',
        'acl ep_allow_domain dstdomain -n .example.org',
        'acl ep_allow_domain dstdomain -n api.test',
        'acl ep_deny_dst dst 203.0.113.0/24',
        'acl ep_deny_domain dstdomain -n bad.example.net',
      ],
    );
    assert.ok(l.includes('acl ep_ports port 25'));
  });

  it('with credentials: Basic through basic_ncsa_auth, 407 for requests without valid ones', () => {
    const l = buildSquidConf(FULL).split('\n');
    assert.ok(l.includes('auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/ep-users'));
    assert.ok(l.includes('auth_param basic realm egress-proxies'));
    assert.ok(l.includes('acl ep_users proxy_auth REQUIRED'));
    assert.ok(!l.join('\n').includes(HASH), 'squid.conf holds no hash: the users file does');
  });

  it('refuses bad ports, CIDRs, destinations, port ranges, users and hashes, never echoing a hash', () => {
    for (const port of [0, 65536, 1.5, NaN])
      throwsField(() => buildSquidConf({ ...SPEC, squidPort: port }), 'squidPort');
    throwsField(() => buildSquidConf({ ...SPEC, allowedClientCidrs: [] }), 'allowedClientCidrs');
    throwsField(
      () => buildSquidConf({ ...SPEC, allowedClientCidrs: ['10.0.0.0/8', '10.0.0.1/8'] }),
      'allowedClientCidrs[1]',
    );
    throwsField(() => buildSquidConf({ ...SPEC, allowedClientCidrs: ['all'] }), 'allowedClientCidrs[0]');
    throwsField(
      () => buildSquidConf({ ...SPEC, allowedClientCidrs: ['10.0.0.0/8\nhttp_access allow all'] }),
      'allowedClientCidrs[0]',
    );
    const egress = FULL.egress!;
    throwsField(() => buildSquidConf({ ...SPEC, egress: { ...egress, allowPorts: [] } }), 'egress.allowPorts');
    for (const bad of ['0', '65536', '10-5', '1-', 'a', '443 80', '08']) {
      throwsField(
        () => buildSquidConf({ ...SPEC, egress: { ...egress, allowPorts: ['443', bad] } }),
        'egress.allowPorts[1]',
      );
    }
    for (const bad of ['10.0.0.1/8', '-x', 'a b', 'x\nhttp_access allow all', '']) {
      throwsField(
        () => buildSquidConf({ ...SPEC, egress: { ...egress, allowDestinations: ['api.test', bad] } }),
        'egress.allowDestinations[1]',
      );
      throwsField(
        () => buildSquidConf({ ...SPEC, egress: { ...egress, denyDestinations: [bad] } }),
        'egress.denyDestinations[0]',
      );
    }
    throwsField(() => buildSquidConf({ ...SPEC, egress: { ...egress, mode: 'open' as 'report' } }), 'egress.mode');
    const users = (user: string, hash: string) => ({ realm: 'r', users: [{ user, hash }] });
    throwsField(() => buildSquidConf({ ...SPEC, auth: users('a b', HASH) }), 'auth.users[0].user');
    for (const bad of ['hunter2', 'abJnggxhB/yWI', '{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=', `${HASH}\nx`]) {
      assert.throws(
        () => buildSquidConf({ ...SPEC, auth: users('alice', bad) }),
        (err: unknown) => field(err) === 'auth.users[0].hash' && !(err as Error).message.includes(bad),
      );
    }
    throwsField(() => buildSquidConf({ ...SPEC, auth: { realm: 'r', users: [] } }), 'auth.users');
    throwsField(() => buildSquidConf({ ...SPEC, auth: { realm: 'a"b', users: [] } }), 'auth.realm');
  });

  it("is accepted by Squid's own parser (`squid -k parse`), which refuses a broken line", async (t) => {
    // scripts/test unpacks Debian's squid into EP_SQUID_ROOT (nothing installed, no daemon);
    // a squid on PATH serves too. The wrapper points Squid's compiled-in data paths into that tree.
    const root = process.env.EP_SQUID_ROOT;
    let squid = root ? join(root, 'usr/sbin/squid') : undefined;
    if (squid === undefined) {
      try {
        squid = (await pexec('sh', ['-c', 'command -v squid'], { timeout: 5000 })).stdout.trim();
      } catch {
        const why = 'no squid: run scripts/test (it unpacks one into .local/squid) or set EP_SQUID_ROOT';
        if (process.env.CI) assert.fail(why);
        t.skip(why);
        return;
      }
    }
    const env = root ? { ...process.env, LD_LIBRARY_PATH: join(root, 'usr/lib/x86_64-linux-gnu') } : process.env;
    const dir = await mkdtemp(join(tmpdir(), 'ep-squid-'));
    const parse = async (text: string): Promise<{ code: number; stderr: string }> => {
      const path = join(dir, 'squid.conf');
      const wrapper = join(dir, 'wrapper.conf');
      await writeFile(path, text);
      const data = root
        ? [
            `mime_table ${root}/usr/share/squid/mime.conf`,
            `icon_directory ${root}/usr/share/squid/icons`,
            `unlinkd_program ${root}/usr/lib/squid/unlinkd`,
            `logfile_daemon ${root}/usr/lib/squid/log_file_daemon`,
            `error_directory ${root}/usr/share/squid-langpack/en`,
          ]
        : [];
      await writeFile(wrapper, [...data, `include ${path}`, ''].join('\n'));
      return new Promise((resolve) => {
        execFile(squid, ['-k', 'parse', '-f', wrapper], { timeout: 20_000, env }, (err, _out, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr }),
        );
      });
    };
    try {
      for (const text of [
        conf,
        buildSquidConf(FULL),
        buildSquidConf({ ...FULL, egress: { ...FULL.egress!, mode: 'enforce' } }),
      ]) {
        // The helper must exist where the parser runs: the unpacked tree's copy stands in for the guest's.
        const good = await parse(root ? text.replace(BASIC_AUTH_HELPER, join(root, BASIC_AUTH_HELPER)) : text);
        assert.equal(good.code, 0, good.stderr);
        assert.doesNotMatch(good.stderr, /ERROR|FATAL|WARNING/, good.stderr);
      }
      const broken = await parse(`${conf}\nhttp_access allow no_such_acl\n`);
      assert.notEqual(broken.code, 0, 'the parser catches a broken line: the check can fail');
      assert.match(broken.stderr, /no_such_acl/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('network-config and the whole seed', () => {
  it('writes DHCPv4 on eth0, or on the virtio_net NIC renamed eth0', () => {
    assert.deepEqual(parse11(buildNetworkConfig('eth0')), { version: 2, ethernets: { eth0: { dhcp4: true } } });
    assert.deepEqual(parse11(buildNetworkConfig('virtio')), {
      version: 2,
      ethernets: { eth0: { match: { driver: 'virtio_net' }, 'set-name': 'eth0', dhcp4: true } },
    });
  });

  it('buildCloudInitSeed writes network-config only when asked', () => {
    const plain = buildCloudInitSeed(SPEC);
    assert.equal(plain.networkConfig, undefined);
    assert.equal(plain.metaData, buildMetaData(SPEC));
    assert.equal(plain.userData, buildUserData(SPEC));
    assert.equal(buildCloudInitSeed({ ...SPEC, network: 'image' }).networkConfig, undefined);
    assert.equal(buildCloudInitSeed({ ...SPEC, network: 'virtio' }).networkConfig, buildNetworkConfig('virtio'));
  });
});

describe('ep-seed (what the project image applies without cloud-init)', () => {
  it('holds the same hostname and the same files, byte for byte, as user-data', () => {
    const lines = buildEpSeed(FULL).split('\n');
    assert.equal(lines[0], EP_SEED_HEADER);
    assert.equal(lines[1], `hostname ${FULL.hostname}`);
    assert.equal(lines.at(-1), '', 'ends with a newline');
    const files = lines.slice(2, -1).map((l) => {
      const [kind, path, permissions, owner, b64, ...rest] = l.split(' ');
      assert.equal(kind, 'file');
      assert.deepEqual(rest, [], 'five fields, no spaces inside one');
      return { path, owner, permissions, content: Buffer.from(b64 ?? '', 'base64').toString('utf8') };
    });
    const user = parse11(buildUserData(FULL)) as { write_files: unknown[] };
    assert.deepEqual(files, user.write_files);
    assert.deepEqual(files, seedWrites(FULL));
    assert.deepEqual(
      files.map((f) => f.path),
      [SQUID_CONF_PATH, SQUID_USERS_PATH],
    );
  });

  it('is part of every seed, and refuses what user-data refuses', () => {
    assert.equal(buildCloudInitSeed(SPEC).epSeed, buildEpSeed(SPEC));
    throwsField(() => buildEpSeed({ ...SPEC, hostname: 'a b' }), 'hostname');
    throwsField(() => buildEpSeed({ ...SPEC, squidPort: 0 }), 'squidPort');
  });
});
