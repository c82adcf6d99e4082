/**
 * README.md's "A five-minute tour", run as written from fresh terminals. The commands are read from
 * the README itself (the backticked commands of its numbered list, after the `scripts/main` it
 * starts from), so an edit that breaks the tour breaks this test, and a tour of another shape fails
 * it with a message that says what changed. Each command runs through `bash -c` in the checkout
 * with a clean environment (PATH of the system folders only, where /usr/bin/node may be older than
 * the project needs: the launchers must find .local/node themselves; HOME, TERM=dumb, CI=true);
 * the commands after the tour's `export` get the variables it sets, as the terminal it was typed
 * into would. What each step must show:
 *
 *   scripts/main                    exit 0 (bounded at 15 minutes: the first run installs and builds)
 *   1. the Web UI                   its URL (loopback) answers 200
 *   2. temporal workflow query      the status names state Running and the condition Healthy=True
 *   3. egressctl dev                prints its ready line; stopped with SIGINT at the end, it exits 0
 *      proxy create + proxy watch   the second proxy reaches the state the watch waits for (Running)
 *   4. egressctl discovery          lists ip:port, the main proxy's among them
 *      proxy delete --wait          ends Deleted
 *   5. scripts/main stop            exit 0; no worker left; the dev server, when this checkout
 *                                   started it, no longer listens on 127.0.0.1:7233 (one started
 *                                   elsewhere is left running: then the main proxy's workflow is no
 *                                   longer running); no test hosts left
 *
 *   node --test --test-reporter=spec test/e2e/tour.test.ts    (as root; scripts/test runs it last)
 *
 * It ends with everything stopped (the tour's last step), so it runs after every other test. Every
 * command and wait is bounded; the background `egressctl dev` is stopped on every path, and a second
 * proxy left by a failed step is deleted through the API while it still runs. It talks only to
 * loopback (the Web UI, the dev server's port); the commands talk to the test hosts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { TestContext } from 'node:test';
import { sleep } from '../support/bounded.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MIN = 60_000;
/** A fresh terminal's environment: no .local/node on PATH (/usr/bin/node is whatever Debian has). */
const CLEAN_ENV: Record<string, string> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: process.env['HOME'] ?? '/root',
  TERM: 'dumb',
  CI: 'true',
};
const BOUND = {
  main: 15 * MIN,
  webUi: 10_000,
  query: MIN,
  devReady: 5 * MIN,
  /** SIGINT to the API, the worker (20 s grace each) and exit. */
  devStop: 90_000,
  create: MIN,
  /** `proxy watch` ends by itself after --watch-ms (default 10 minutes); this is a margin over it. */
  watch: 11 * MIN,
  discovery: MIN,
  /** `proxy delete --wait` waits at most --wait-ms (default 60 s). */
  delete: 2 * MIN,
  /** The delete update (60 s) and the workflow's end (120 s), the stops, the dev server and the hosts. */
  stop: 8 * MIN,
  status: MIN,
};
const TAIL_LINES = 40;
const OUTPUT_CAP = 1 << 20;
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const say = (line: string): void => void process.stderr.write(`tour: ${line}\n`);

// ---- the tour, read from README.md --------------------------------------------------------------

/** The tour's commands, verbatim from the README (the `proxy …` shorthand with its `bin/egressctl`). */
export interface Tour {
  main: string;
  webUi: string;
  query: string;
  /** The workflow the query asks (`--workflow-id`). */
  queryWorkflowId: string;
  dev: string;
  exportLine: string;
  exported: Record<string, string>;
  create: string;
  watch: string;
  /** ENTRY/NAME of the second proxy. */
  second: string;
  /** The state `proxy watch --until` waits for. */
  until: string;
  discovery: string;
  delete: string;
  stop: string;
}

class TourShapeError extends Error {
  constructor(what: string) {
    super(
      `README.md's "A five-minute tour" no longer has the shape this test runs: ${what}. ` +
        `Fix the tour, or teach test/e2e/tour.test.ts its new shape.`,
    );
  }
}

/** The backticked spans of `text`, each with its line breaks and indentation as single spaces. */
function spans(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => (m[1] ?? '').replace(/\s+/g, ' ').trim());
}

/** Is this span a command one types (rather than a name such as `proxy/local/main` or `ip:port`)? */
const isCommand = (s: string): boolean => /^(bin\/|scripts\/|\.local\/|export |proxy )/.test(s);

/** Parses the tour section of README.md (its text) into the commands this test runs. */
export function parseTour(readme: string): Tour {
  const lines = readme.split('\n');
  const start = lines.findIndex((l) => /^## A five-minute tour\s*$/.test(l));
  if (start < 0) throw new TourShapeError('there is no "## A five-minute tour" section');
  const endAt = lines.findIndex((l, i) => i > start && /^#{1,2} /.test(l));
  const body = lines.slice(start + 1, endAt < 0 ? undefined : endAt);
  // The text before the list, and the numbered items (an item goes on over its indented lines).
  const preamble: string[] = [];
  const items: { n: number; text: string }[] = [];
  for (const line of body) {
    const m = /^(\d+)\.\s+(.*)$/.exec(line);
    if (m) items.push({ n: Number(m[1]), text: m[2] ?? '' });
    else if (items.length === 0) preamble.push(line);
    else if (/^\s+\S/.test(line)) items[items.length - 1]!.text += ` ${line.trim()}`;
    else if (line.trim() !== '') throw new TourShapeError(`an unindented line after the list: ${JSON.stringify(line)}`);
  }
  const numbers = items.map((i) => i.n);
  if (numbers.join() !== '1,2,3,4,5') {
    throw new TourShapeError(`its numbered list should be steps 1 to 5 and is [${numbers.join(', ')}]`);
  }
  const mainCommands = spans(preamble.join(' ')).filter(isCommand);
  const main = mainCommands[0];
  if (mainCommands.length !== 1 || main !== 'scripts/main') {
    throw new TourShapeError(
      `the text before the list should name one command, \`scripts/main\`, and names ${JSON.stringify(mainCommands)}`,
    );
  }
  /** Step n's commands, `proxy …` written out as the `bin/egressctl proxy …` it follows. */
  const commands = (n: number): string[] => {
    const out: string[] = [];
    for (const s of spans(items[n - 1]!.text).filter(isCommand)) {
      if (s.startsWith('proxy ')) {
        if (!out.some((c) => c.startsWith('bin/egressctl '))) {
          throw new TourShapeError(`step ${n}'s \`${s}\` follows no \`bin/egressctl\` command it would be short for`);
        }
        out.push(`bin/egressctl ${s}`);
      } else out.push(s);
    }
    return out;
  };
  /** Matches step n's commands against `shapes`, one each, in order; returns the matches. */
  const step = (n: number, shapes: [string, RegExp][]): RegExpExecArray[] => {
    const got = commands(n);
    const matches = shapes.map(([, re], i) => (got[i] === undefined ? null : re.exec(got[i])));
    if (got.length !== shapes.length || matches.some((m) => m === null)) {
      throw new TourShapeError(
        `step ${n}'s commands should be [${shapes.map(([d]) => d).join('; ')}] and are ` +
          `[${got.map((c) => `\`${c}\``).join('; ')}]`,
      );
    }
    return matches as RegExpExecArray[];
  };

  if (commands(1).length !== 0) throw new TourShapeError(`step 1 (the Web UI) has commands: ${commands(1).join('; ')}`);
  const webUi = /\bhttp:\/\/127\.0\.0\.1:\d+\/?/.exec(items[0]!.text)?.[0];
  if (webUi === undefined) throw new TourShapeError('step 1 names no Web UI URL on 127.0.0.1');
  const [query] = step(2, [
    ['the Temporal CLI: workflow query --workflow-id ID --type status', /\btemporal workflow query\b.*--type status\b/],
  ]);
  const queryWorkflowId = /--workflow-id (\S+)/.exec(query!.input)?.[1];
  if (queryWorkflowId === undefined) throw new TourShapeError(`step 2's query names no --workflow-id: ${query!.input}`);
  const [dev, exp, create, watch] = step(3, [
    ['bin/egressctl dev', /^bin\/egressctl dev\b/],
    ['export EGRESSCTL_API=… EGRESSCTL_TOKEN_FILE=…', /^export(?: [A-Z_][A-Z0-9_]*=[^\s'"$`]+)+$/],
    ['bin/egressctl proxy create ENTRY/NAME …', /^bin\/egressctl proxy create (\S+\/\S+)/],
    ['proxy watch ENTRY/NAME --until STATE', /^bin\/egressctl proxy watch (\S+\/\S+) .*--until (\w+)\b/],
  ]);
  const exported = Object.fromEntries(
    exp!.input
      .split(' ')
      .slice(1)
      .map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]),
  );
  if (exported['EGRESSCTL_API'] === undefined) throw new TourShapeError(`step 3's export sets no EGRESSCTL_API`);
  const [discovery, del] = step(4, [
    ['bin/egressctl discovery', /^bin\/egressctl discovery\b/],
    ['proxy delete ENTRY/NAME --wait', /^bin\/egressctl proxy delete (\S+\/\S+) .*--wait\b/],
  ]);
  const second = create![1]!;
  for (const [what, m] of [
    ['proxy watch', watch!],
    ['proxy delete', del!],
  ] as const) {
    const ref = /^bin\/egressctl proxy \w+ (\S+)/.exec(m.input)?.[1];
    if (ref !== second) throw new TourShapeError(`step 3 creates ${second} and \`${what}\` names ${ref ?? 'none'}`);
  }
  const [stop] = step(5, [['scripts/main stop', /^scripts\/main stop$/]]);
  return {
    main,
    webUi,
    query: query!.input,
    queryWorkflowId,
    dev: dev!.input,
    exportLine: exp!.input,
    exported,
    create: create!.input,
    watch: watch!.input,
    second,
    until: watch![2]!,
    discovery: discovery!.input,
    delete: del!.input,
    stop: stop!.input,
  };
}

// ---- commands in a clean environment ------------------------------------------------------------

interface Result {
  cmd: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** The bound it exceeded (then its process group was killed). */
  timedOutAfter?: number;
}

/** A `bash -c CMD` in its own process group (as a terminal's job), its output collected. */
class Job {
  readonly cmd: string;
  readonly child: ChildProcess;
  readonly started = Date.now();
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private closed: Promise<void>;

  constructor(cmd: string, env: Record<string, string>) {
    this.cmd = cmd;
    this.child = spawn('bash', ['-c', cmd], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const keep = (s: string): string => (s.length > OUTPUT_CAP ? s.slice(-OUTPUT_CAP) : s);
    this.child.stdout!.on('data', (b: Buffer) => void (this.stdout = keep(this.stdout + b.toString('utf8'))));
    this.child.stderr!.on('data', (b: Buffer) => void (this.stderr = keep(this.stderr + b.toString('utf8'))));
    this.closed = new Promise((resolve) => this.child.once('close', () => resolve()));
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => resolve({ code, signal }));
      this.child.once('error', (err) => {
        this.stderr += `\n(spawn failed: ${err.message})`;
        resolve({ code: null, signal: null });
      });
    });
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends `signal` to the job's process group (what a terminal's Ctrl-C does for SIGINT). */
  signal(signal: NodeJS.Signals): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // the group is gone
    }
  }

  /** Resolves with the exit once the job ends, or undefined after `ms`. */
  async waitExit(ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for the job's end (or ends its group: SIGTERM, then SIGKILL 10 s later) and returns the result. */
  async result(boundMs: number): Promise<Result> {
    let exit = await this.waitExit(Math.max(0, this.started + boundMs - Date.now()));
    let timedOutAfter: number | undefined;
    if (exit === undefined) {
      timedOutAfter = boundMs;
      this.signal('SIGTERM');
      exit = await this.waitExit(10_000);
      if (exit === undefined) {
        this.signal('SIGKILL');
        exit = await this.waitExit(10_000);
      }
    }
    // Output still in the pipes; a daemon the command left behind may hold them open: not waited for.
    await Promise.race([this.closed, sleep(2_000)]);
    this.child.stdout!.destroy();
    this.child.stderr!.destroy();
    return {
      cmd: this.cmd,
      code: exit?.code ?? null,
      signal: exit?.signal ?? null,
      stdout: this.stdout,
      stderr: this.stderr,
      ms: Date.now() - this.started,
      ...(timedOutAfter !== undefined && { timedOutAfter }),
    };
  }
}

const tail = (s: string): string => {
  const lines = s.trimEnd().split('\n');
  return (lines.length > TAIL_LINES ? ['…', ...lines.slice(-TAIL_LINES)] : lines).map((l) => `    ${l}`).join('\n');
};

/** What a failure says about a command: the command, how it ended, and its output's tails. */
function report(r: Result, env: Record<string, string>): string {
  const how =
    r.timedOutAfter !== undefined
      ? `did not end within ${secs(r.timedOutAfter)} (its process group was killed)`
      : r.code !== null
        ? `exited ${r.code}`
        : `ended by ${r.signal ?? 'an unknown cause'}`;
  const extra = Object.keys(env).filter((k) => !(k in CLEAN_ENV));
  return (
    `\n  $ ${r.cmd}\n  (bash -c in ${ROOT}, clean environment${extra.length ? ` plus ${extra.join(', ')}` : ''})` +
    `\n  ${how} after ${secs(r.ms)}` +
    `\n  stdout (last ${TAIL_LINES} lines):\n${tail(r.stdout) || '    (none)'}` +
    `\n  stderr (last ${TAIL_LINES} lines):\n${tail(r.stderr) || '    (none)'}\n`
  );
}

/** Runs `cmd` to its end (bounded by `boundMs`); asserts exit 0 unless `expectCode` says otherwise. */
async function run(
  t: TestContext,
  cmd: string,
  env: Record<string, string>,
  boundMs: number,
  expectCode: number | null = 0,
): Promise<Result & { why: string }> {
  say(`$ ${cmd}`);
  const r = await new Job(cmd, env).result(boundMs);
  const why = report(r, env);
  t.diagnostic(`${cmd}: exit ${r.code ?? r.signal} in ${secs(r.ms)}`);
  if (expectCode !== null) assert.equal(r.code, expectCode, `a command did not exit ${expectCode}:${why}`);
  return { ...r, why };
}

/** Whether something accepts TCP connections on 127.0.0.1:port (bounded at 5 s). */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (open: boolean): void => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(5_000, () => done(true)); // no refusal: something holds the port
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** The JSON object in the Temporal CLI's query output (it prints the result after a label). */
function queryResult(output: string): Record<string, unknown> | undefined {
  const from = output.indexOf('{');
  const to = output.lastIndexOf('}');
  if (from < 0 || to < from) return undefined;
  try {
    return JSON.parse(output.slice(from, to + 1)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

// ---- the test -----------------------------------------------------------------------------------

describe("README.md's five-minute tour, each command in a fresh terminal", { timeout: 45 * MIN }, () => {
  let tour: Tour | undefined;

  it('the README has the tour this test runs', () => {
    tour = parseTour(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    for (const [k, v] of Object.entries(tour)) {
      if (typeof v === 'string') say(`${k}: ${v}`);
    }
  });

  it('runs as written: scripts/main, then steps 1 to 5', async (t) => {
    assert.ok(tour, 'the tour could not be read from README.md (the test above says why)');
    const T = tour;
    const t0 = Date.now();
    const typedExport = { ...CLEAN_ENV, ...T.exported };

    await run(t, T.main, CLEAN_ENV, BOUND.main);

    // 1. The Web UI answers (a browser is not part of this test).
    const ui = await fetch(T.webUi, { signal: AbortSignal.timeout(BOUND.webUi) });
    await ui.arrayBuffer();
    assert.equal(ui.status, 200, `step 1: the Web UI at ${T.webUi} answered ${ui.status}`);

    // 2. The status query: Running, and the Healthy condition True.
    const q = await run(t, T.query, CLEAN_ENV, BOUND.query);
    const status = queryResult(q.stdout);
    assert.ok(status, `step 2: no JSON status in the query's output:${q.why}`);
    assert.equal(status['state'], 'Running', `step 2: the status' state:${q.why}`);
    const conditions = status['conditions'] as Record<string, { status?: string }> | undefined;
    assert.equal(conditions?.['Healthy']?.status, 'True', `step 2: the status' Healthy condition:${q.why}`);
    const mainAddress = `${String(status['ip'])}:${String(status['port'])}`;
    assert.match(mainAddress, /^\d+\.\d+\.\d+\.\d+:\d+$/, `step 2: the status' ip and port:${q.why}`);

    // 3. `egressctl dev` in one terminal; the second proxy from another.
    say(`$ ${T.dev}   (in the background until its ready line)`);
    const dev = new Job(T.dev, CLEAN_ENV);
    let created = false;
    let deleted = false;
    let devExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let devAliveAtCtrlC = false;
    try {
      const readyBy = Date.now() + BOUND.devReady;
      while (!/^ready\./m.test(dev.stdout) && dev.alive && Date.now() < readyBy) await sleep(250);
      if (!/^ready\./m.test(dev.stdout)) {
        const r: Result = dev.alive
          ? {
              cmd: T.dev,
              code: null,
              signal: null,
              stdout: dev.stdout,
              stderr: dev.stderr,
              ms: Date.now() - dev.started,
            }
          : await dev.result(0);
        const what = dev.alive ? `printed no ready line within ${secs(BOUND.devReady)}` : 'ended before its ready line';
        assert.fail(`step 3: \`${T.dev}\` ${what}:${report(r, CLEAN_ENV)}`);
      }
      t.diagnostic(`${T.dev}: ready in ${secs(Date.now() - dev.started)}`);

      const c = await run(t, T.create, typedExport, BOUND.create);
      created = true;
      const [entry, name] = T.second.split('/');
      assert.match(
        c.stdout,
        new RegExp(`\\b${entry}\\b.*\\b${name}\\b`),
        `step 3: create names no ${T.second}:${c.why}`,
      );
      const w = await run(t, T.watch, typedExport, BOUND.watch);
      const last = w.stdout.trimEnd().split('\n').pop() ?? '';
      assert.match(last, new RegExp(`\\s${T.until}\\b`), `step 3: the watch's last line is not ${T.until}:${w.why}`);

      // 4. Discovery lists ip:port (the main proxy's, Healthy in step 2, among them); the delete ends Deleted.
      const d = await run(t, T.discovery, typedExport, BOUND.discovery);
      assert.match(d.stdout, /\b\d+\.\d+\.\d+\.\d+:\d+\b/, `step 4: discovery lists no ip:port:${d.why}`);
      assert.ok(d.stdout.includes(mainAddress), `step 4: discovery lacks the main proxy's ${mainAddress}:${d.why}`);
      const del = await run(t, T.delete, typedExport, BOUND.delete);
      assert.match(del.stdout, /\bDeleted\b/, `step 4: the delete did not end Deleted:${del.why}`);
      deleted = true;
    } finally {
      if (created && !deleted && dev.alive) {
        const r = await new Job(`bin/egressctl proxy delete ${T.second} --wait`, typedExport).result(BOUND.delete);
        t.diagnostic(`cleanup: deleting ${T.second} after a failure: exit ${r.code ?? r.signal}`);
      }
      devAliveAtCtrlC = dev.alive;
      if (devAliveAtCtrlC) {
        say(`Ctrl-C to \`${T.dev}\``);
        dev.signal('SIGINT');
        devExit = await dev.waitExit(BOUND.devStop);
        if (devExit === undefined) {
          dev.signal('SIGKILL');
          await dev.waitExit(10_000);
        }
      }
    }
    const devResult = await dev.result(0);
    assert.ok(devAliveAtCtrlC, `step 3: \`${T.dev}\` ended before its Ctrl-C:${report(devResult, CLEAN_ENV)}`);
    assert.ok(
      devExit,
      `step 3: \`${T.dev}\` did not stop within ${secs(BOUND.devStop)} of SIGINT:${report(devResult, CLEAN_ENV)}`,
    );
    assert.equal(devExit.code, 0, `step 3: \`${T.dev}\` after SIGINT:${report(devResult, CLEAN_ENV)}`);
    assert.match(devResult.stdout, /^stopped\.$/m, `step 3: \`${T.dev}\` after SIGINT:${report(devResult, CLEAN_ENV)}`);

    // 5. Stop everything. Whose dev server answers on 127.0.0.1:7233 decides what "stopped" means.
    const before = await run(t, 'scripts/temporal status', CLEAN_ENV, BOUND.status);
    const ours = /^dev server: +running \(pid \d+\)/m.test(before.stdout);
    await run(t, T.stop, CLEAN_ENV, BOUND.stop);
    assert.ok(!existsSync(join(ROOT, '.data/worker.pid')), 'step 5: .data/worker.pid is still there');
    if (ours) {
      assert.equal(await listening(7233), false, 'step 5: something still listens on 127.0.0.1:7233 after the stop');
    } else {
      t.diagnostic(`the dev server on 127.0.0.1:7233 was not started by this checkout: the stop leaves it running`);
      const wf = await run(
        t,
        `.local/venv/bin/temporal workflow describe --workflow-id ${T.queryWorkflowId} -o json`,
        CLEAN_ENV,
        BOUND.status,
      );
      assert.match(
        wf.stdout,
        /"status": *"WORKFLOW_EXECUTION_STATUS_COMPLETED"/,
        `step 5: the main proxy's workflow did not complete (its delete):${wf.why}`,
      );
    }
    const hosts = await run(t, 'test/hosts/testhost status', CLEAN_ENV, BOUND.status, 3);
    assert.match(hosts.stdout, /^no test hosts$/m, `step 5: test hosts are left:${hosts.why}`);
    say(`the tour ran in ${secs(Date.now() - t0)}`);
  });
});
