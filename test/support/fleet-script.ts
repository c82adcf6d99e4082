/**
 * The fleet page's script (api/fleet/app.js) run in a node:vm context over a small stand-in
 * document, for unit tests of what it renders: elements keep their tag, attributes and children,
 * and text stays text (a string child is a text node, never parsed), so a value holding markup can
 * only come out as text. Its fetch goes to a Fastify app through `inject` (the real routes over
 * whatever stores the test gives them); its timers never fire, so one load is rendered and
 * nothing runs after the test.
 */
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import type { FastifyInstance } from 'fastify';

const SCRIPT = new URL('../../api/fleet/app.js', import.meta.url);

export type Node = El | Text;

export class Text {
  readonly data: string;
  constructor(data: string) {
    this.data = data;
  }
}

export class El {
  readonly children: Node[] = [];
  readonly attributes = new Map<string, string>();
  readonly dataset: Record<string, string> = {};
  value = '';
  readonly tag: string;
  constructor(tag: string) {
    this.tag = tag;
  }

  set className(v: string) {
    this.attributes.set('class', v);
  }
  get className(): string {
    return this.attributes.get('class') ?? '';
  }
  get id(): string {
    return this.attributes.get('id') ?? '';
  }
  setAttribute(k: string, v: string): void {
    this.attributes.set(k, String(v));
  }
  getAttribute(k: string): string | null {
    return this.attributes.get(k) ?? null;
  }
  append(...nodes: (Node | string)[]): void {
    for (const n of nodes) this.children.push(typeof n === 'string' ? new Text(n) : n);
  }
  replaceChildren(...nodes: (Node | string)[]): void {
    this.children.length = 0;
    this.append(...nodes);
  }
  set textContent(v: string) {
    this.replaceChildren(String(v));
  }
  get textContent(): string {
    return this.children.map((c) => (c instanceof Text ? c.data : c.textContent)).join('');
  }
  addEventListener(): void {}
  focus(): void {}
  /** Elements under this one (depth first) for which `test` holds. */
  findAll(test: (e: El) => boolean): El[] {
    const out: El[] = [];
    for (const c of this.children) {
      if (!(c instanceof El)) continue;
      if (test(c)) out.push(c);
      out.push(...c.findAll(test));
    }
    return out;
  }
  querySelector(selector: string): El | null {
    if (!selector.startsWith('#')) throw new Error(`the stand-in document finds only #id, not ${selector}`);
    return this.findAll((e) => e.id === selector.slice(1))[0] ?? null;
  }
}

/** The text of `e` with whitespace runs made one space. */
export function textOf(e: El): string {
  return e.textContent.replace(/\s+/g, ' ').trim();
}

/** The cells (as text) of each row of the tables under `e`. */
export function rowsOf(e: El): string[][] {
  return e.findAll((x) => x.tag === 'tr').map((tr) => tr.children.filter((c) => c instanceof El).map((c) => textOf(c)));
}

export interface RenderedPage {
  body: El;
  main: El;
  status: El;
  /** The paths the script asked for, in order. */
  requests: string[];
}

/**
 * Loads the page's script with `token` in its session, lets it read `app` once and answers the
 * rendered document (bounded: `timeoutMs`, default 5 s, until <body data-state> is set).
 */
export async function renderFleetPage(app: FastifyInstance, token: string, timeoutMs = 5000): Promise<RenderedPage> {
  const body = new El('body');
  const byId = new Map<string, El>();
  for (const id of ['main', 'status', 'announce']) {
    const e = new El(id === 'main' ? 'main' : 'p');
    e.setAttribute('id', id);
    byId.set(id, e);
    body.append(e);
  }
  body.dataset['refreshMs'] = '5000';
  const session = new Map<string, string>([['egress-fleet-token', token]]);
  const requests: string[] = [];
  let timers = 0;
  const context = {
    document: {
      body,
      visibilityState: 'visible',
      getElementById: (id: string) => byId.get(id) ?? null,
      createElement: (tag: string) => new El(tag),
      addEventListener() {},
    },
    location: { hash: '', pathname: '/fleet', search: '' },
    history: { replaceState() {} },
    sessionStorage: {
      getItem: (k: string) => session.get(k) ?? null,
      setItem: (k: string, v: string) => void session.set(k, v),
      removeItem: (k: string) => void session.delete(k),
    },
    setTimeout: () => ++timers,
    clearTimeout() {},
    URLSearchParams,
    AbortController,
    fetch: async (path: string, init: { headers: Record<string, string> }) => {
      requests.push(path);
      const res = await app.inject({ method: 'GET', url: path, headers: init.headers });
      return {
        ok: res.statusCode >= 200 && res.statusCode < 300,
        status: res.statusCode,
        statusText: res.statusMessage,
        text: () => Promise.resolve(res.body),
      };
    },
  };
  runInNewContext(readFileSync(SCRIPT, 'utf8'), context, { filename: 'api/fleet/app.js' });
  const deadline = Date.now() + timeoutMs;
  while (body.dataset['state'] === undefined) {
    if (Date.now() > deadline) throw new Error(`the fleet page rendered nothing in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return { body, main: byId.get('main')!, status: byId.get('status')!, requests };
}
