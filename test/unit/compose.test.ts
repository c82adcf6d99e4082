/**
 * docker-compose.yml and the Dockerfile, checked without a container engine: the file parses,
 * every service built from the Dockerfile runs a command whose file the image copies and whose
 * flags that command accepts, published ports do not collide and bind to a configurable address,
 * mounts of secrets and configuration are read-only, the image bakes in no secret, and it carries
 * every module that the worker, the API and egressctl load (found by walking their imports) and
 * not the dev stack.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { parse } from 'yaml';

const pexec = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
interface Service {
  build?: unknown;
  command?: string[];
  ports?: string[];
  volumes?: string[];
  secrets?: string[];
  environment?: Record<string, string>;
}
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, Service>;
  secrets?: Record<string, { file: string }>;
};
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const copied = [...dockerfile.matchAll(/^COPY\s+(\S+)\s+\S+$/gm)].map((m) => m[1]!.replace(/^\.\//, ''));
const built = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);

/**
 * The production entry points: the worker, the API and egressctl, as their bin/ launchers start
 * them, and the workflows the worker bundles at start (runtime/workflow-bundle.ts names
 * workflows/index.ts by path, not by an import).
 */
const ENTRY_POINTS = [
  'bin/worker',
  'bin/api',
  'bin/egressctl',
  'workers/worker.ts',
  'workers/api.ts',
  'workers/egressctl.ts',
  'workflows/index.ts',
];

/**
 * The relative modules `file` loads at run time: `import … from`, `export … from` and `import('…')`
 * with a literal specifier. Type-only imports and `typeof import('…')` are erased, and a dynamic
 * import of a computed URL (egressctl's `dev` command loading dev/stack.ts from a source checkout)
 * is not followed.
 */
function runtimeImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const specifiers: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier)) {
      specifiers.push(node.moduleSpecifier.text);
    } else if (
      ts.isExportDeclaration(node) &&
      !node.isTypeOnly &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      specifiers.push(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      specifiers.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return specifiers.filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s));
}

/** Every file of the repository reachable from the entry points (paths relative to the root). */
function reachableFiles(): string[] {
  const seen = new Set<string>();
  const queue = ENTRY_POINTS.map((e) => join(root, e));
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    assert.ok(existsSync(file), `${relative(root, file)} exists`);
    if (/\.(ts|mjs|js)$|^[^.]*$/.test(file.split('/').pop()!)) queue.push(...runtimeImports(file));
  }
  return [...seen].map((f) => relative(root, f)).sort();
}

describe('docker-compose.yml and the Dockerfile', () => {
  it('the worker and the API are built from the Dockerfile', () => {
    assert.deepEqual(built.map(([name]) => name).sort(), ['api', 'worker']);
  });

  for (const [name, service] of built) {
    it(`${name}: its command's file is copied into the image and accepts the flags given`, async () => {
      const [script = '', ...args] = service.command ?? [];
      assert.match(script, /^bin\/[a-z]+$/, `${name} runs a bin/ launcher (compile cache on)`);
      assert.ok(existsSync(join(root, script)), `${script} exists`);
      assert.ok(
        copied.some((c) => script.startsWith(`${c}/`)),
        `the Dockerfile copies the folder of ${script} (copies: ${copied.join(', ')})`,
      );
      const { stdout } = await pexec(process.execPath, [join(root, script), '--help'], { timeout: 30_000 });
      for (const flag of args.filter((a) => a.startsWith('--'))) {
        assert.ok(stdout.includes(flag), `${script} --help lists ${flag}`);
      }
    });
  }

  it('every module the worker, the API and egressctl load is inside a copied folder; dev/ and scripts/ are not copied', () => {
    const files = reachableFiles();
    assert.ok(
      files.includes('workers/worker.ts') && files.some((f) => f.startsWith('lib/')),
      'the walk follows imports',
    );
    for (const file of files) {
      const top = file.split('/')[0]!;
      if (file.includes('/')) assert.ok(copied.includes(top), `the Dockerfile copies ${top}/ (for ${file})`);
      else
        assert.match(
          dockerfile,
          new RegExp(`^COPY .*\\b${top.replaceAll('.', '\\.')}\\b`, 'm'),
          `the Dockerfile copies ${file}`,
        );
      assert.ok(!/^(dev|scripts|test|bench)\//.test(file), `${file} is not loaded by production`);
    }
    for (const dir of [
      'lib',
      'contracts',
      'runtime',
      'client',
      'cli',
      'activities',
      'workflows',
      'api',
      'workers',
      'bin',
    ]) {
      assert.ok(copied.includes(dir), `the Dockerfile copies ${dir}/`);
    }
    for (const dir of ['dev', 'scripts', 'test', 'bench']) {
      assert.ok(!copied.includes(dir), `the Dockerfile does not copy ${dir}/`);
    }
  });

  it('published ports are distinct and bind to a configurable address, not 0.0.0.0 by default', () => {
    const published = Object.values(compose.services).flatMap((s) => s.ports ?? []);
    assert.ok(published.length >= 3);
    const host = published.map((p) => p.split(':').slice(0, -1).join(':'));
    assert.equal(new Set(host).size, host.length, `host ports collide: ${published.join(' ')}`);
    for (const p of published) assert.match(p, /^\$\{[A-Z_]+:-127\.0\.0\.1\}:/, `${p} binds to 127.0.0.1 by default`);
  });

  it('configuration and secrets are mounted read-only; no secret is baked into the image', () => {
    for (const v of compose.services['worker']!.volumes ?? []) assert.match(v, /:ro$/, `${v} is read-only`);
    assert.deepEqual(compose.services['api']!.secrets, ['api-tokens']);
    assert.ok(compose.secrets?.['api-tokens']?.file, 'the token file comes from the host');
    assert.doesNotMatch(dockerfile, /^(COPY|ADD)\s+\S*(ssh|token|secret|providers\.yaml|\.data)/im);
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['.data', '.local', 'node_modules', '.git'])
      assert.ok(ignored.includes(p), `.dockerignore has ${p}`);
  });

  it('the prometheus service scrapes the worker and the API of this file with deploy/prometheus, mounted read-only', () => {
    const prom = compose.services['prometheus'];
    assert.ok(prom, 'a prometheus service exists');
    // SOURCE:TARGET[:ro], where SOURCE may be `${VAR:-default}`: the target is the last absolute path.
    const mounts = new Map((prom.volumes ?? []).map((v) => [/:(\/[^:]*)(?::ro)?$/.exec(v)?.[1] ?? v, v] as const));
    for (const [target, v] of mounts) if (target !== '/prometheus') assert.match(v, /:ro$/, `${v} is read-only`);
    const config = parse(readFileSync(join(root, 'deploy/prometheus/prometheus.yml'), 'utf8')) as {
      rule_files: string[];
      scrape_configs: {
        job_name: string;
        authorization?: { credentials_file: string };
        file_sd_configs: { files: string[] }[];
      }[];
    };
    const inContainer = (p: string): string => `/etc/prometheus/${p}`;
    assert.match(mounts.get(inContainer('prometheus.yml')) ?? '', /^\.\/deploy\/prometheus\/prometheus\.yml:/);
    for (const f of config.rule_files) {
      assert.ok(mounts.has(inContainer(f.split('/')[0]!)), `the rule file ${f} is mounted`);
    }
    const port = (args: string[], flag: string, re: RegExp): string => {
      const v = args[args.indexOf(flag) + 1] ?? '';
      return re.exec(v)?.[1] ?? `no ${flag} in ${args.join(' ')}`;
    };
    const expected: Record<string, string> = {
      'egress-worker': `worker:${port(compose.services['worker']!.command ?? [], '--metrics-listen', /:(\d+)$/)}`,
      'egress-api': `api:${port(compose.services['api']!.command ?? [], '--port', /^(\d+)$/)}`,
    };
    assert.deepEqual(config.scrape_configs.map((j) => j.job_name).sort(), Object.keys(expected).sort());
    for (const job of config.scrape_configs) {
      const files = job.file_sd_configs.flatMap((c) => c.files);
      for (const f of files) assert.ok(mounts.has(inContainer(f.split('/')[0]!)), `${f} is mounted`);
      const targets = files.flatMap((f) =>
        (parse(readFileSync(join(root, 'deploy/prometheus', f), 'utf8')) as { targets: string[] }[]).flatMap(
          (g) => g.targets,
        ),
      );
      assert.deepEqual(targets, [expected[job.job_name]], `${job.job_name} scrapes the service's listening port`);
      if (job.authorization)
        assert.ok(mounts.has(inContainer(job.authorization.credentials_file)), 'the token is mounted');
    }
  });

  it('the worker and the API talk to the Temporal service of the same file', () => {
    for (const [, s] of built) assert.equal(s.environment?.['TEMPORAL_ADDRESS'], 'temporal:7233');
    assert.ok(compose.services['temporal'], 'a temporal service exists');
  });
});

/**
 * Compose stays true to the cluster mode that runs here (scripts/temporal cluster, which
 * test/integration/temporal-cluster-tls.test.ts runs for real): the same server version, the same
 * persistence settings and the same dynamic config file.
 */
describe('docker-compose.yml and scripts/temporal cluster', () => {
  const version = readFileSync(join(root, 'dev/cluster/VERSION'), 'utf8').trim();
  const full = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8')) as {
    services: Record<string, Service & { image?: string; configs?: { source: string; target: string }[] }>;
    configs?: Record<string, { file?: string; content?: string }>;
    'x-postgres-env': Record<string, string>;
  };
  // The template's @@NAME@@ fields are ports and paths, filled by scripts/temporal-cluster.
  const server = parse(
    readFileSync(join(root, 'dev/cluster/server.yaml.tmpl'), 'utf8').replace(/@@[A-Z_]+@@/g, '1'),
  ) as {
    persistence: {
      numHistoryShards: number;
      defaultStore: string;
      visibilityStore: string;
      datastores: Record<string, { sql: { pluginName: string; databaseName: string } }>;
    };
  };

  it('every temporalio/server and admin-tools image defaults to the version the cluster mode builds', () => {
    assert.match(version, /^\d+\.\d+\.\d+$/, 'dev/cluster/VERSION holds one version');
    const images = Object.values(full.services)
      .map((s) => s.image ?? '')
      .filter((i) => /^temporalio\/(server|admin-tools):/.test(i));
    assert.ok(images.length >= 3, `server and admin-tools images found: ${images.join(', ')}`);
    for (const image of images) assert.equal(image.split(':-')[1]?.replace(/\}$/, ''), version, image);
  });

  it('the server mounts the cluster mode dynamic config file itself (one source)', () => {
    const mount = full.services['temporal']!.configs?.[0];
    assert.ok(mount, 'the temporal service mounts a config');
    assert.equal(full.configs?.[mount.source]?.file, './dev/cluster/dynamicconfig.yaml');
    assert.ok(existsSync(join(root, 'dev/cluster/dynamicconfig.yaml')));
    const path = full.services['temporal']!.environment?.['DYNAMIC_CONFIG_FILE_PATH'] ?? '';
    assert.ok(mount.target.endsWith(path), `DYNAMIC_CONFIG_FILE_PATH ${path} is the mounted file ${mount.target}`);
  });

  it('the persistence settings are the cluster mode ones: plugin, databases, history shards', () => {
    const p = server.persistence;
    const plugins = new Set(Object.values(p.datastores).map((d) => d.sql.pluginName));
    assert.deepEqual([...plugins], [full['x-postgres-env']['DB']]);
    assert.equal(p.datastores[p.defaultStore]!.sql.databaseName, 'temporal');
    assert.equal(p.datastores[p.visibilityStore]!.sql.databaseName, 'temporal_visibility');
    const schema = (full.services['temporal-schema']!.command ?? []).join('\n');
    assert.match(schema, /for db in temporal temporal_visibility/, 'compose migrates the same two databases');
    assert.match(schema, new RegExp(`schema/postgresql/v12/`), 'with the same schema (postgresql v12)');
    assert.equal(Number(full.services['temporal']!.environment?.['NUM_HISTORY_SHARDS']), p.numHistoryShards);
  });
});
