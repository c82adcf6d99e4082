/*
 * The fleet page's script, served as written by api/fleet-page.ts at /fleet/app.js (no build
 * step; docs/fleet-page.md). It asks for an API token once (or takes it from the address's
 * `#token=...` fragment, which it then removes), keeps it in this tab's sessionStorage, and reads
 * GET /v1/pools, GET /v1/pools/{entry}/{pool} (the pool's status: its members and its door's last
 * report) and GET /v1/hosts with `Authorization: Bearer`, so the routes' own roles apply; a 401
 * or 403 forgets the token and asks again. Every value is put on the page as text (textContent,
 * never HTML). It refreshes every data-refresh-ms of <body>, one refresh at a time, and backs off
 * (doubling, at most a minute) while the API fails.
 */
'use strict';

(function fleetPage() {
  const TOKEN_KEY = 'egress-fleet-token';
  const MAX_BACKOFF_MS = 60_000;
  /** Pages of 100 pools read per refresh (the rest is said to be left out). */
  const MAX_POOL_PAGES = 10;
  /** Pools whose status (members, rollout step) is read per refresh, a few at a time. */
  const MAX_POOL_DETAILS = 100;
  const DETAIL_CONCURRENCY = 4;
  const REQUEST_TIMEOUT_MS = 15_000;

  const body = document.body;
  const refreshMs = Math.max(1000, Number(body.dataset.refreshMs) || 5000);
  const main = document.getElementById('main');
  const statusLine = document.getElementById('status');
  const announcer = document.getElementById('announce');
  let timer;
  let failures = 0;
  let generation = 0;
  let lastUpdated;
  /** A refresh came due while the tab was hidden: it runs when the tab is shown again. */
  let dueWhileHidden = false;

  /** An element with attributes and children (strings become text nodes: never parsed as HTML). */
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null) continue;
      node.append(typeof c === 'string' || typeof c === 'number' ? String(c) : c);
    }
    return node;
  }

  /**
   * The page's state (`ok`, `error`, `token`) on <body>; a change of it is announced to screen
   * readers once (the status line itself changes on every refresh, so it is not a live region).
   */
  function setState(state, announcement) {
    if (body.dataset.state !== state) announcer.textContent = announcement;
    body.dataset.state = state;
  }

  // ---- the token ----

  /** A token in the address's fragment (#token=...) is kept and removed from the address bar. */
  function tokenFromFragment() {
    const fragment = location.hash.replace(/^#/, '');
    if (fragment === '') return;
    const params = new URLSearchParams(fragment);
    const token = params.get('token');
    if (token === null) return;
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', location.pathname + location.search + (rest === '' ? '' : '#' + rest));
    if (token.trim() !== '') sessionStorage.setItem(TOKEN_KEY, token.trim());
  }

  function askToken(message) {
    clearTimeout(timer);
    generation++;
    const input = h('input', {
      id: 'token',
      name: 'token',
      type: 'password',
      autocomplete: 'off',
      spellcheck: 'false',
      required: true,
      'aria-describedby': 'token-help',
    });
    const form = h(
      'form',
      { id: 'token-form', 'aria-labelledby': 'token-title' },
      h('h2', { id: 'token-title' }, 'API token'),
      message ? h('p', { class: 'error', role: 'alert' }, message) : null,
      h('label', { for: 'token' }, 'Token'),
      ' ',
      input,
      ' ',
      h('button', { type: 'submit' }, 'Show the fleet'),
      h(
        'p',
        { id: 'token-help', class: 'help' },
        "A token of the API's token file; a read token is enough. It is kept in this tab only " +
          '(sessionStorage) and sent to this API as Authorization: Bearer.',
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const token = input.value.trim();
      if (token === '') return;
      sessionStorage.setItem(TOKEN_KEY, token);
      main.replaceChildren();
      void refresh();
    });
    main.replaceChildren(form);
    statusLine.textContent = message ? 'The API refused the token.' : 'A token is needed.';
    setState('token', statusLine.textContent);
    input.focus();
  }

  function forgetToken() {
    sessionStorage.removeItem(TOKEN_KEY);
    askToken();
  }

  // ---- reading the API ----

  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    get auth() {
      return this.status === 401 || this.status === 403;
    }
  }

  async function getJson(path, token) {
    const abort = new AbortController();
    const t = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
    let res;
    let text;
    try {
      res = await fetch(path, {
        headers: { authorization: 'Bearer ' + token, accept: 'application/json' },
        cache: 'no-store',
        credentials: 'omit',
        signal: abort.signal,
      });
      text = await res.text();
    } catch (err) {
      const why = abort.signal.aborted
        ? 'no answer in ' + REQUEST_TIMEOUT_MS / 1000 + ' s'
        : String(err.message || err);
      throw new ApiFailure(0, 'NETWORK', 'GET ' + path + ': ' + why);
    } finally {
      clearTimeout(t);
    }
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const e = (json && json.error) || {};
      throw new ApiFailure(res.status, e.code || '', e.message || text.slice(0, 200) || res.statusText);
    }
    return json;
  }

  async function load(token) {
    const pools = [];
    let pageToken;
    let pages = 0;
    do {
      const q = new URLSearchParams({ pageSize: '100' });
      if (pageToken) q.set('pageToken', pageToken);
      const page = await getJson('/v1/pools?' + q.toString(), token);
      pools.push(...(page.pools || []));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken && pages < MAX_POOL_PAGES);
    pools.sort((a, b) => (a.entry + '/' + a.name).localeCompare(b.entry + '/' + b.name));
    const left = pageToken ? 'more pools than ' + pools.length + ' (only these are shown)' : undefined;

    const details = new Map();
    const wanted = pools.slice(0, MAX_POOL_DETAILS);
    let next = 0;
    const readDetails = async () => {
      while (next < wanted.length) {
        const p = wanted[next++];
        const path = '/v1/pools/' + encodeURIComponent(p.entry) + '/' + encodeURIComponent(p.name);
        try {
          details.set(p.workflowId, await getJson(path, token));
        } catch (err) {
          if (err.auth) throw err;
          details.set(p.workflowId, { failure: err });
        }
      }
    };
    await Promise.all(Array.from({ length: DETAIL_CONCURRENCY }, readDetails));

    let hosts;
    try {
      hosts = { list: (await getJson('/v1/hosts', token)).hosts || [] };
    } catch (err) {
      if (err.auth) throw err;
      hosts = { failure: err };
    }
    return { pools, left, details, hosts };
  }

  // ---- formatting ----

  function age(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return '';
    const s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400);
    const hr = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    if (d > 0) return d + 'd ' + hr + 'h';
    if (hr > 0) return hr + 'h ' + m + 'm';
    if (m > 0) return m + 'm ' + (s % 60) + 's';
    return s + 's';
  }

  function mib(n) {
    if (typeof n !== 'number') return '';
    return n >= 1024 ? (n / 1024).toFixed(1) + ' GiB' : n + ' MiB';
  }

  function num(n) {
    return typeof n === 'number' ? String(n) : '';
  }

  function clock(date) {
    return h('time', { datetime: date.toISOString() }, date.toLocaleTimeString());
  }

  /** An RFC 3339 time as the reader's local time (the exact value in the datetime attribute). */
  function when(iso) {
    const date = typeof iso === 'string' ? new Date(iso) : undefined;
    return date && Number.isFinite(date.getTime()) ? clock(date) : '';
  }

  /** A word with a class for colour: the word itself says it (colour is never the only sign). */
  function badge(text, kind) {
    return h('span', { class: 'badge ' + kind }, text);
  }

  function table(caption, columns, rows, empty) {
    if (rows.length === 0) return h('p', { class: 'empty' }, empty);
    return h(
      'div',
      { class: 'scroll' },
      h(
        'table',
        {},
        h('caption', {}, caption),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            columns.map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        h(
          'tbody',
          {},
          rows.map((cells) =>
            h(
              'tr',
              {},
              cells.map((c, i) => (i === 0 ? h('th', { scope: 'row' }, c) : h('td', {}, c))),
            ),
          ),
        ),
      ),
    );
  }

  // ---- rendering ----

  /** A cordoned host's phase and reason; a drain past its deadline (drain.overdue) in red. */
  function cordonBadge(x) {
    const overdue = x.phase === 'Draining' && x.drain && x.drain.overdue === true;
    const text = x.phase + (overdue ? ' (overdue)' : '') + (x.reason ? ': ' + x.reason : '');
    return badge(text, overdue ? 'bad' : 'warn');
  }

  function phaseBadge(phase) {
    if (!phase) return '';
    const kind = phase === 'Ready' ? 'good' : phase === 'Degraded' ? 'bad' : 'warn';
    return badge(phase, kind);
  }

  function healthBadge(healthy) {
    if (healthy === 'True') return badge('Healthy', 'good');
    if (healthy === 'False') return badge('Unhealthy', 'bad');
    return badge('Unknown', 'warn');
  }

  /**
   * A pool's door as its last report says (status.door): its address and how many of its exits are
   * up; "no door" when the pool has none reported, nothing when the status could not be read.
   */
  function doorCell(st) {
    if (!st) return '';
    const door = st.door;
    if (!door) return 'no door';
    const exits = Array.isArray(door.exits) ? door.exits : [];
    const up = exits.filter((e) => e.up === true).length;
    if (exits.length === 0) return [door.listen + ' ', badge('no exits', 'bad')];
    const kind = up === exits.length ? 'good' : up === 0 ? 'bad' : 'warn';
    return [door.listen + ' ', badge(up + ' of ' + exits.length + ' exits up', kind)];
  }

  function poolsSection(data) {
    const rows = data.pools.map((p) => {
      const d = data.details.get(p.workflowId) || {};
      const st = d.status || {};
      const pick = (k) => (st[k] !== undefined ? st[k] : p[k]);
      const notes = [];
      if (st.paused) notes.push('paused');
      if (st.reason) notes.push(st.reason);
      if (st.degraded) notes.push(st.degraded.failures.length + ' failing members');
      if (d.statusError) notes.push(d.statusError);
      if (d.failure) notes.push('status unavailable: ' + d.failure.message);
      return [
        p.entry + '/' + p.name,
        phaseBadge(pick('phase')),
        num(pick('desired')),
        num(pick('healthy')),
        num(pick('available')),
        num(pick('updated')),
        num(pick('spares')),
        st.rollout ? st.rollout.step : '',
        num(pick('revision')),
        st.members ? String(st.members.length) : '',
        doorCell(d.status),
        notes.join('; '),
      ];
    });
    const columns = ['Pool', 'Phase', 'Desired', 'Healthy', 'Available', 'Updated', 'Spares', 'Rollout step'];
    return h(
      'section',
      { id: 'pools', 'aria-labelledby': 'pools-title' },
      h('h2', { id: 'pools-title' }, 'Pools'),
      data.left ? h('p', { class: 'warn-text' }, 'There are ' + data.left + '.') : null,
      table(
        'Pools: ' + data.pools.length,
        [...columns, 'Revision', 'Members', 'Door', 'Notes'],
        rows,
        'No open pools.',
      ),
    );
  }

  function membersSection(p, d, index) {
    const id = 'members-' + index;
    const st = d && d.status;
    const title = 'Members of ' + p.entry + '/' + p.name;
    let content;
    if (!st) content = h('p', { class: 'empty' }, "Members unavailable: the pool's status could not be read.");
    else {
      const rows = st.members.map((m) => [
        m.name,
        m.host || '',
        m.role + (m.condemned ? ' (' + m.condemned + ')' : ''),
        m.state,
        healthBadge(m.healthy),
        m.available ? 'yes' : 'no',
        age(m.ageMs),
        m.address || '',
        m.imageKey + ' (rev ' + m.revision + ')',
        m.lastError || '',
        m.exitIp || '',
      ]);
      content = table(
        title + ': ' + rows.length,
        [
          'Member',
          'Host',
          'Role',
          'State',
          'Health',
          'In discovery',
          'Age',
          'Address',
          'Image',
          'Last error',
          'Exit IP',
        ],
        rows,
        'No members.',
      );
    }
    return h(
      'section',
      { class: 'members', 'aria-labelledby': id, 'data-pool': p.entry + '/' + p.name },
      h('h3', { id }, title),
      content,
      st ? doorSection(p, st.door) : null,
    );
  }

  /** Each exit of a pool's door with its role and whether the door had it up, as last reported. */
  function doorSection(p, door) {
    const name = p.entry + '/' + p.name;
    let content;
    if (!door) content = h('p', { class: 'empty' }, 'No door: none has reported for ' + name + '.');
    else {
      const exits = Array.isArray(door.exits) ? door.exits : [];
      const rows = exits.map((e) => [e.name, e.role, e.up === true ? badge('up', 'good') : badge('down', 'bad')]);
      content = [
        h('p', {}, 'Door of ' + name + ' at ' + door.listen + '; reported ', when(door.at), ' (on each change).'),
        table('Exits of the door of ' + name + ': ' + rows.length, ['Exit', 'Role', 'In rotation'], rows, 'No exits.'),
      ];
    }
    return h('section', { class: 'door', 'aria-label': 'Door of ' + name, 'data-pool': name }, content);
  }

  function hostsSection(hosts) {
    let content;
    if (hosts.failure) {
      const why =
        hosts.failure.status === 404
          ? 'this API does not serve /v1/hosts.'
          : hosts.failure.status + ' ' + hosts.failure.code + ': ' + hosts.failure.message;
      content = h('p', { id: 'hosts-unavailable', class: 'warn-text' }, 'Hosts unavailable: ' + why);
    } else {
      const rows = hosts.list.map((x) => [
        x.entry + '/' + x.host,
        x.reachable === true
          ? badge('yes', 'good')
          : x.reachable === false
            ? badge('no', 'bad')
            : badge('unknown', 'warn'),
        x.cordoned ? cordonBadge(x) : 'no',
        typeof x.memoryFreeMiB === 'number'
          ? mib(x.memoryFreeMiB) + (typeof x.memoryTotalMiB === 'number' ? ' of ' + mib(x.memoryTotalMiB) : '')
          : '',
        num(x.cpus),
        num(x.proxies) + (typeof x.maxProxies === 'number' ? ' of ' + x.maxProxies : ''),
        when(x.surveyedAt),
        x.error || '',
      ]);
      content = table(
        'Hosts: ' + rows.length,
        ['Host', 'Reachable', 'Cordoned', 'Free memory', 'CPUs', 'Proxies', 'Surveyed', 'Error'],
        rows,
        'No hosts.',
      );
    }
    return h(
      'section',
      { id: 'hosts', 'aria-labelledby': 'hosts-title' },
      h('h2', { id: 'hosts-title' }, 'Hosts'),
      content,
    );
  }

  function render(data) {
    const toolbar = h(
      'div',
      { class: 'toolbar' },
      h('button', { type: 'button', id: 'refresh-now' }, 'Refresh now'),
      ' ',
      h('button', { type: 'button', id: 'forget-token' }, 'Forget token'),
    );
    toolbar.querySelector('#refresh-now').addEventListener('click', () => void refresh());
    toolbar.querySelector('#forget-token').addEventListener('click', forgetToken);
    const members = h(
      'section',
      { id: 'members', 'aria-labelledby': 'members-title' },
      h('h2', { id: 'members-title' }, 'Members'),
      data.pools.length === 0 ? h('p', { class: 'empty' }, 'No pools, so no members.') : null,
      data.pools.slice(0, MAX_POOL_DETAILS).map((p, i) => membersSection(p, data.details.get(p.workflowId), i)),
    );
    main.replaceChildren(toolbar, poolsSection(data), hostsSection(data.hosts), members);
  }

  // ---- the refresh loop ----

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // A hidden tab does not poll; it reads again as soon as it is shown.
      if (document.visibilityState === 'hidden') dueWhileHidden = true;
      else void refresh();
    }, ms);
  }

  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState !== 'hidden' && dueWhileHidden) {
      dueWhileHidden = false;
      void refresh();
    }
  });

  async function refresh() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) return askToken();
    const mine = ++generation;
    clearTimeout(timer);
    try {
      const data = await load(token);
      if (mine !== generation) return;
      failures = 0;
      lastUpdated = new Date();
      render(data);
      statusLine.replaceChildren('Last updated ', clock(lastUpdated), '; refreshing every ' + refreshMs / 1000 + ' s.');
      setState('ok', 'The fleet is shown.');
      body.dataset.updated = lastUpdated.toISOString();
      schedule(refreshMs);
    } catch (err) {
      if (mine !== generation) return;
      if (err.auth) {
        sessionStorage.removeItem(TOKEN_KEY);
        const what = err.status === 401 ? 'not accepted' : 'not allowed to read the fleet';
        return askToken(
          'The token was ' + what + ' (' + err.status + ' ' + err.code + ': ' + err.message + '). Enter a token again.',
        );
      }
      failures++;
      const wait = Math.min(refreshMs * 2 ** failures, MAX_BACKOFF_MS);
      const since = lastUpdated ? ['; the data below is from ', clock(lastUpdated)] : ['; nothing loaded yet'];
      statusLine.replaceChildren(
        'Refresh failed (' + (err.status ? err.status + ' ' + err.code + ': ' : '') + err.message + ')',
        ...since,
        '; retrying in ' + Math.round(wait / 1000) + ' s.',
      );
      setState('error', 'Refreshing the fleet failed; the page retries.');
      schedule(wait);
    }
  }

  tokenFromFragment();
  void refresh();
})();
