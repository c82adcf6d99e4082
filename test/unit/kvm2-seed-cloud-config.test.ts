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
  SQUID_CONF_PATH,
  assertHostnameLabel,
  buildCloudInitSeed,
  buildMetaData,
  buildNetworkConfig,
  buildSquidConf,
  buildUserData,
} from '../../lib/kvm2/seed/cloud-config.ts';
import type { CloudInitSpec } from '../../lib/kvm2/seed/cloud-config.ts';
import { Kvm2BuildError } from '../../lib/kvm2/build-errors.ts';

const pexec = promisify(execFile);

const SPEC: CloudInitSpec = {
  instanceId: '4dea22b3-1d52-d8f3-2516-782e98ab3fa0',
  hostname: 'ep-lab-a-p1',
  squidPort: 3128,
  allowedClientCidrs: ['10.0.0.0/8', '2001:db8::/32'],
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

  it('enables the guest agent and enables and restarts squid, in that order', () => {
    assert.deepEqual(doc.runcmd, [
      'systemctl enable qemu-guest-agent || true',
      'systemctl --no-block start qemu-guest-agent || true',
      'systemctl enable squid',
      'systemctl reload-or-restart squid',
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

  it('listens on the port and allows CONNECT from the allowed CIDRs only, denying everything else', () => {
    assert.ok(lines.includes('http_port 3128'));
    assert.ok(lines.includes('visible_hostname ep-lab-a-p1'));
    assert.deepEqual(
      lines.filter((l) => l.startsWith('acl ep_clients')),
      ['acl ep_clients src 10.0.0.0/8', 'acl ep_clients src 2001:db8::/32'],
    );
    assert.deepEqual(
      lines.filter((l) => l.startsWith('http_access')),
      [
        'http_access deny !Safe_ports',
        'http_access deny CONNECT !SSL_ports',
        'http_access allow CONNECT ep_clients',
        'http_access deny all',
      ],
    );
    assert.ok(lines.includes('cache deny all'));
    assert.ok(conf.endsWith('\n'));
  });

  it('extends SSL_ports and Safe_ports so CONNECT reaches ports other than 443', () => {
    assert.ok(lines.includes('acl SSL_ports port 1-65535'));
    assert.ok(lines.includes('acl Safe_ports port 1-65535'));
    const narrow = buildSquidConf({ ...SPEC, squidPort: 8080, connectPorts: ['443', '8443-8449'] }).split('\n');
    assert.ok(narrow.includes('http_port 8080'));
    assert.deepEqual(
      narrow.filter((l) => l.startsWith('acl SSL_ports') || l.startsWith('acl Safe_ports')),
      [
        'acl SSL_ports port 443',
        'acl SSL_ports port 8443-8449',
        'acl Safe_ports port 443',
        'acl Safe_ports port 8443-8449',
      ],
    );
  });

  it('refuses bad ports, CIDRs and port ranges', () => {
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
    throwsField(() => buildSquidConf({ ...SPEC, connectPorts: [] }), 'connectPorts');
    for (const bad of ['0', '65536', '10-5', '1-', 'a', '443 80', '08']) {
      throwsField(() => buildSquidConf({ ...SPEC, connectPorts: ['443', bad] }), 'connectPorts[1]');
    }
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
      const good = await parse(conf);
      assert.equal(good.code, 0, good.stderr);
      assert.doesNotMatch(good.stderr, /ERROR|FATAL|WARNING/, good.stderr);
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
