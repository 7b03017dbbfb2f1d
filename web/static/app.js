// molt web view: plain JavaScript, no framework, no third-party code.
// It reads only what the REST API (/v1) serves, as the signed-in caller:
// the session is an HttpOnly cookie set by POST /v1/session, writes carry
// its CSRF value, and nothing is kept in localStorage or sessionStorage.
// Every value from the API reaches the page as text (textContent), never
// as HTML. docs/web.md describes the pages.

const NS = 1e6; // Go durations travel as nanoseconds
const DAY = 86400e3;

const st = {
  me: null, // api.Session of the signed-in caller
  csrf: '',
  minIndex: 0, // highest X-Molt-Index seen: reads never go back in time
  pollMs: 2000,
  page: null,
  gen: 0, // bumped on navigation: a refresh of an older page is dropped
  timer: 0,
  parked: false, // a refresh waits for the tab to be visible again
  routes: {}, // route name -> false once it answered 404 "no route"
  releases: null,
  releasesAt: 0,
};

// ---------------------------------------------------------------- DOM

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// focusKey is a selector that finds an element again after a redraw
// built it anew: its id, or its action and what the action is on.
function focusKey(e) {
  if (!e || e === document.body) return '';
  if (e.id) return `#${CSS.escape(e.id)}`;
  const parts = ['action', 'pool', 'node'].filter((k) => e.dataset && e.dataset[k] !== undefined).map((k) => `[data-${k}="${CSS.escape(e.dataset[k])}"]`);
  return parts.length ? parts.join('') : '';
}

// region is a container re-rendered only when what it shows changed, so
// that selections and screen readers are not disturbed by polls that
// bring nothing new; when it is redrawn, the control that had the
// keyboard focus gets it back.
function region(attrs) {
  const el = h('div', attrs);
  let last;
  el.show = (key, build) => {
    const k = typeof key === 'string' ? key : JSON.stringify(key);
    if (k === last) return false;
    last = k;
    const active = document.activeElement;
    const keep = active && el.contains(active) ? focusKey(active) : '';
    el.replaceChildren(...[build()].flat(Infinity).filter((x) => x !== null && x !== undefined && x !== false));
    if (keep) { const again = el.querySelector(keep); if (again) again.focus(); }
    return true;
  };
  return el;
}

function announce(text) {
  const live = document.getElementById('live');
  live.textContent = '';
  setTimeout(() => { live.textContent = text; }, 50);
}

// ---------------------------------------------------------- formatting

const pad = (n) => String(n).padStart(2, '0');

function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  if (isNaN(d) || d.getUTCFullYear() < 1900) return '';
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

function timeEl(s) {
  const t = fmtTime(s);
  return t ? h('time', { datetime: s, text: t }) : '';
}

function fmtDur(ms) {
  if (!(ms >= 0)) return '';
  let s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const d = Math.floor(s / 86400); s %= 86400;
  const hh = Math.floor(s / 3600); s %= 3600;
  const m = Math.floor(s / 60); s %= 60;
  return [d && `${d}d`, hh && `${hh}h`, m && `${m}m`, s && !d && `${s}s`].filter(Boolean).join(' ');
}

const ms = (s) => (s ? new Date(s).getTime() : NaN);
const valid = (s) => s && new Date(s).getUTCFullYear() > 1900;

function badge(state, label) {
  const s = String(state || 'none');
  return h('span', { class: `badge s-${s.replace(/[^A-Za-z0-9_-]/g, '')}`, 'data-state': s, text: label || s });
}

function problemBox(p) {
  if (!p) return null;
  const meta = [p.status && `HTTP ${p.status}`, p.rule && `rule ${p.rule}`, p.type && p.type.replace('https://molt.dev/problems/', 'problem ')].filter(Boolean).join(' · ');
  return h('div', { class: 'problem', role: 'alert', tabindex: '-1', 'data-rule': p.rule || '' },
    h('strong', { text: p.title || 'Refused' }), h('div', { class: 'detail', text: p.detail || '' }), meta && h('div', { class: 'small', text: meta }));
}

function dl(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter((p) => p && p[1] !== '' && p[1] !== undefined && p[1] !== null)
    .map(([k, v]) => [h('dt', { text: k }), h('dd', null, v)]));
}

function table(headers, rows, attrs) {
  return h('table', attrs, h('thead', null, h('tr', null, headers.map((x) => h('th', { scope: 'col', class: /^(#|Nodes|Done|Hosts|Attempts?)$/.test(x) ? 'num' : null, text: x })))),
    h('tbody', null, rows));
}

// ------------------------------------------------------------------ API

async function api(method, path, body, bearer) {
  const headers = { Accept: 'application/json' };
  if (st.minIndex) headers['X-Molt-Min-Index'] = String(st.minIndex);
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && st.csrf) headers['X-Molt-CSRF'] = st.csrf;
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw { status: 0, title: 'The coordinator did not answer', detail: String(e && e.message || e) };
  }
  const idx = Number(res.headers.get('X-Molt-Index') || 0);
  if (idx > st.minIndex) st.minIndex = idx;
  const text = res.status === 204 ? '' : await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const p = data && typeof data === 'object' ? data : { title: res.statusText, detail: text.slice(0, 500) };
    p.status = res.status;
    throw p;
  }
  return data;
}

const noRoute = (p) => p && p.status === 404 && /^no route /.test(p.detail || '');

// optional reads a route other work adds (audit, upgrade status,
// channels): null while the coordinator does not serve it.
async function optional(name, path) {
  if (st.routes[name] === false) return null;
  try {
    const v = await api('GET', path);
    st.routes[name] = true;
    return v;
  } catch (p) {
    if (noRoute(p)) { st.routes[name] = false; return null; }
    throw p;
  }
}

async function releases() {
  if (!st.releases || Date.now() - st.releasesAt > 30000) {
    st.releases = await api('GET', '/v1/releases');
    st.releasesAt = Date.now();
  }
  return st.releases;
}

const enc = encodeURIComponent;
const cpath = (c) => `/v1/clusters/${enc(c)}`;

function cmpVersion(a, b) {
  const pa = String(a).replace(/^v/, '').split('.').map(Number);
  const pb = String(b).replace(/^v/, '').split('.').map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return (pa[i] || 0) - (pb[i] || 0);
  return 0;
}

// ------------------------------------------------------------- actions

function confirmAction(title, body, yes) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-body').replaceChildren(...[body].flat().map((x) => (x instanceof Node ? x : h('p', { text: x }))));
  const yesBtn = document.getElementById('confirm-yes');
  const noBtn = document.getElementById('confirm-no');
  yesBtn.textContent = yes;
  const opener = document.activeElement;
  const openerKey = focusKey(opener);
  return new Promise((resolve) => {
    const done = (v) => {
      yesBtn.onclick = noBtn.onclick = dlg.oncancel = null;
      dlg.close();
      // A poll may have redrawn the button that opened the dialog.
      if (opener && !opener.isConnected && openerKey) { const again = document.querySelector(openerKey); if (again) again.focus(); }
      resolve(v);
    };
    yesBtn.onclick = () => done(true);
    noBtn.onclick = () => done(false);
    dlg.oncancel = (e) => { e.preventDefault(); done(false); };
    dlg.showModal();
    noBtn.focus();
  });
}

// act asks, then runs, then shows the outcome in out (the API's problem
// on refusal) and refreshes the page.
async function act(out, { title, body, yes, run, done }) {
  if (!(await confirmAction(title, body, yes))) return;
  out.replaceChildren(h('p', { class: 'muted', text: `${yes}…` }));
  try {
    const res = await run();
    out.replaceChildren(h('div', { class: 'ok-note', role: 'status', text: done(res) }));
    announce(done(res));
  } catch (p) {
    if (p.status === 401) return signedOut(p);
    const box = problemBox(p);
    out.replaceChildren(box);
    box.focus();
    return;
  }
  kick();
}

function roleHint() {
  if (!st.me || st.me.role !== 'viewer') return null;
  return h('p', { class: 'muted small', text: 'You are signed in as a viewer: the coordinator refuses these actions for your role and says why here.' });
}

// ------------------------------------------------------------- session

async function boot() {
  document.getElementById('signout').addEventListener('click', signOut);
  window.addEventListener('hashchange', navigate);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && st.parked) { st.parked = false; tick(st.gen); }
  });
  try {
    const me = await api('GET', '/v1/session');
    signedIn(me);
  } catch (p) {
    showSignIn(p.status === 401 ? null : p);
  }
}

function signedIn(me) {
  st.me = me;
  st.csrf = me.csrf || '';
  document.getElementById('who-name').textContent = me.name;
  const role = document.getElementById('who-role');
  role.textContent = me.role;
  role.className = `badge s-${me.role}`;
  document.getElementById('who').hidden = false;
  optional('audit', '/v1/audit').catch(() => { st.routes.audit = true; }).finally(() => {
    document.getElementById('nav-audit').hidden = st.routes.audit !== true;
  });
  navigate();
}

function signedOut(p) {
  st.me = null;
  st.csrf = '';
  showSignIn(p && { ...p, title: 'Your session ended; sign in again' });
}

async function signOut() {
  try { await api('DELETE', '/v1/session'); } catch { /* the session may already be gone */ }
  st.me = null;
  st.csrf = '';
  showSignIn(null);
}

function showSignIn(p) {
  st.gen++;
  clearTimeout(st.timer);
  document.getElementById('who').hidden = true;
  document.getElementById('nav-audit').hidden = true;
  document.title = 'Sign in · molt';
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'token-help' });
  const out = h('div', { 'aria-live': 'polite' }, problemBox(p));
  const form = h('form', { class: 'signin', novalidate: true },
    h('h1', { text: 'Sign in to molt' }),
    h('div', { class: 'row' }, h('div', { class: 'grow' }, h('label', { for: 'token', text: 'API token' }), input)),
    h('p', { id: 'token-help', class: 'muted small', text: 'An API token of this coordinator (moltctl token create --role viewer|operator|admin). It is sent once; this member answers with an HttpOnly session cookie that stands for it until you sign out, close the browser or the session ends (12 hours by default, never after the token expires). Your role applies to everything you do here.' }),
    h('button', { type: 'submit', class: 'primary', text: 'Sign in' }), out);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const tok = input.value.trim();
    if (!tok) { out.replaceChildren(problemBox({ title: 'Enter an API token' })); return; }
    try {
      const me = await api('POST', '/v1/session', undefined, tok);
      input.value = '';
      signedIn(me);
    } catch (err) {
      const box = problemBox(err);
      out.replaceChildren(box);
      box.focus();
    }
  });
  document.getElementById('main').replaceChildren(form);
  input.focus();
}

// ---------------------------------------------------------------- router

const routes = [
  [/^\/?$/, () => fleetPage()],
  [/^\/clusters\/([^/]+)$/, (m) => clusterPage(m[1])],
  [/^\/clusters\/([^/]+)\/maintenance$/, (m) => maintenancePage(m[1])],
  [/^\/clusters\/([^/]+)\/preflight$/, (m) => preflightsPage(m[1])],
  [/^\/clusters\/([^/]+)\/preflight\/([^/]+)$/, (m) => preflightPage(m[1], m[2])],
  [/^\/audit$/, () => auditPage()],
];

function navigate() {
  if (!st.me) return;
  const path = decodeURIComponent(location.hash.replace(/^#/, '') || '/');
  let page = null;
  for (const [re, make] of routes) {
    const m = path.match(re);
    if (m) { page = make(m); break; }
  }
  if (!page) page = { title: 'Not found', el: h('section', null, h('h1', { text: 'No such page' }), h('p', null, h('a', { href: '#/', text: 'Back to the fleet' }))), refresh: async () => {} };
  st.gen++;
  clearTimeout(st.timer);
  st.releases = null; // a page read anew reads the catalog anew
  st.page = page;
  document.title = `${page.title} · molt`;
  const main = document.getElementById('main');
  main.replaceChildren(page.el);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if ((a.dataset.nav === 'fleet' && /^\/(clusters|$)/.test(path)) || (a.dataset.nav === 'audit' && path === '/audit')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (st.navigated) main.focus();
  st.navigated = true;
  tick(st.gen);
}

// kick refreshes the page now (after an action).
function kick() {
  clearTimeout(st.timer);
  tick(st.gen);
}

async function tick(gen) {
  if (gen !== st.gen || !st.page) return;
  if (document.hidden) { st.parked = true; return; }
  const page = st.page;
  const t0 = performance.now();
  try {
    await page.refresh();
    if (gen === st.gen && page.error) page.error.show('', () => null);
  } catch (p) {
    if (gen !== st.gen) return;
    if (p && p.status === 401) { signedOut(p); return; }
    if (page.error) page.error.show(p, () => problemBox(p));
  }
  document.getElementById('nav-audit').hidden = st.routes.audit !== true;
  if (gen !== st.gen) return;
  const took = performance.now() - t0;
  window.moltUI.stats.refreshes++;
  window.moltUI.stats.lastRefreshMs = took;
  clearTimeout(st.timer);
  st.timer = setTimeout(() => tick(gen), Math.max(page.every || st.pollMs, 3 * took));
}

// ------------------------------------------------------------------ fleet

function upgradeProgress(u) {
  if (!u) return { done: 0, total: 0, running: 0, failed: 0 };
  let done = 0, running = 0, failed = 0;
  for (const n of u.nodes || []) {
    if (n.state === 'done') done++;
    else if (n.state === 'running') running++;
    else if (n.state === 'failed') failed++;
  }
  return { done, total: (u.nodes || []).length, running, failed };
}

function whyCell(w) {
  if (!w) return '';
  const blocked = (w.blockedBy || []).map((b) => [b.kind, b.name].filter(Boolean).join(' ') + (valid(b.until) ? ` until ${fmtTime(b.until)}` : '')).join('; ');
  return h('div', null, badge(w.state), blocked && h('div', { class: 'small', text: blocked }),
    w.sequence && h('div', { class: 'small', text: sequenceText(w.sequence) }),
    valid(w.nextOpportunity) && h('div', { class: 'small muted' }, 'next: ', timeEl(w.nextOpportunity)));
}

// sequenceText says where a cluster stands in its rollout sequence (api
// SequenceWait): the stage it waits for, that stage's clusters not at the
// version yet, when its soak ends, or the failure that holds it.
function sequenceText(q) {
  const at = `sequence ${q.sequence}, stage ${q.stage}, ${q.version}: `;
  if (q.bypassed) return at + 'forced through by the end of support';
  if (!q.waitsFor) return at + 'eligible';
  if (q.held) return at + `held: failed on ${(q.failed || []).join(', ')} in stage ${q.heldStage} until resumed or skipped`;
  if ((q.notReached || []).length) return at + `waits for stage ${q.waitsFor}, where ${q.notReached.join(', ')} not at ${q.version} yet`;
  return at + `waits for stage ${q.waitsFor} to soak until ${fmtTime(q.soakEnds)}`;
}

function fleetPage() {
  const error = region();
  const list = region({ id: 'fleet' });
  const chans = region({ id: 'channels' });
  const members = region({ id: 'members' });
  let why = {};
  let whyAt = 0;
  const el = h('section', null, h('h1', { text: 'Fleet' }), error, list, chans, members);
  return {
    title: 'Fleet', el, error,
    async refresh() {
      const clusters = await api('GET', '/v1/clusters');
      if (st.routes.why !== false && Date.now() - whyAt > 10000) {
        whyAt = Date.now();
        const got = {};
        await Promise.all(clusters.slice(0, 100).map(async (c) => {
          try { got[c.spec.name] = await optional('why', `${cpath(c.spec.name)}/upgrade-status`); } catch { /* shown on the cluster's page */ }
        }));
        why = got;
      }
      const showWhy = st.routes.why === true;
      const rows = clusters.map((c) => {
        const u = c.status.upgrade;
        const p = upgradeProgress(u);
        const active = u && u.inProgress; // the coordinator's reading
        const agents = c.status.agents || [];
        const reporting = agents.filter((a) => a.registered && !a.missing).length;
        const missing = agents.filter((a) => a.missing).length;
        const nodes = (c.spec.pools || []).reduce((n, pl) => n + (pl.nodes || []).length, 0);
        return h('tr', { 'data-cluster': c.spec.name },
          h('th', { scope: 'row' }, h('a', { href: `#/clusters/${enc(c.spec.name)}`, text: c.spec.name })),
          h('td', { text: c.spec.kind }),
          h('td', { text: c.spec.channel || 'none' }),
          h('td', { class: 'mono', text: c.status.version }),
          h('td', { class: 'mono', text: active ? u.to : c.spec.version }),
          h('td', null, u ? badge(u.state) : h('span', { class: 'muted', text: 'never upgraded' }), u && u.pauseReason && h('div', { class: 'small', text: `paused: ${u.pauseReason}` })),
          h('td', null, u && p.total ? [h('progress', { max: p.total, value: p.done, 'aria-label': `${c.spec.name}: ${p.done} of ${p.total} nodes upgraded` }), ` ${p.done}/${p.total}`] : ''),
          h('td', { class: 'num' }, `${reporting}/${nodes}`, missing ? h('div', { class: 'small', text: `${missing} missing` }) : ''),
          showWhy ? h('td', null, whyCell(why[c.spec.name])) : null);
      });
      list.show({ clusters: clusters.map((c) => [c.spec, c.status.version, c.status.upgrade && [c.status.upgrade.id, c.status.upgrade.revision, c.status.upgrade.state], (c.status.agents || []).map((a) => [a.registered, a.missing])]), why: showWhy && why }, () =>
        clusters.length === 0 ? h('p', { class: 'notice', text: 'No cluster is registered yet (PUT /v1/clusters/{name}, admin).' })
          : table(['Cluster', 'Kind', 'Channel', 'Current', 'Target', 'Upgrade', 'Progress', 'Agents', showWhy && 'Why (not) upgrading'].filter(Boolean), rows, { 'aria-label': 'Clusters' }));
      const ch = await optional('channels', '/v1/channels').catch(() => null);
      chans.show(ch, () => (ch ? [h('h2', { text: 'Release channels' }), genericTable(Array.isArray(ch) ? ch : ch.channels || [ch])] : null));
      const ms = await api('GET', '/v1/members');
      members.show(ms, () => [h('h2', { text: 'Coordinator members' }), memberTable(ms)]);
    },
  };
}

// memberTable lists the coordinator's members with the molt release each
// runs and what it reads (docs/mixed-versions.md); a member the answering
// one does not know is taken to run 0.1.0.
function memberTable(ms) {
  const rows = ms.map((m) => {
    const c = m.capabilities;
    return h('tr', { 'data-member': m.id },
      h('th', { scope: 'row', class: 'mono', text: m.id }),
      h('td', { text: m.leader ? 'leader' : m.voter ? 'follower' : 'non-voter' }),
      h('td', { class: 'mono', text: c ? c.version : 'unknown (0.1.0 assumed)' }),
      h('td', { class: 'mono small', text: c && c.commit ? c.commit.slice(0, 12) : '' }),
      h('td', { class: 'small', text: c ? `commands ${c.command}/${c.raftCommand}, snapshots ${c.stateSnapshot}/${c.raftSnapshot}, step layout ${c.stepLayout}` : '' }),
      h('td', { class: 'mono small', text: m.httpAddr || '' }),
      h('td', null, m.reason ? badge('failed', m.reason) : badge('ok')));
  });
  return table(['Member', 'Role', 'molt', 'Commit', 'Reads', 'Address', 'Status'], rows, { 'aria-label': 'Coordinator members' });
}

// genericTable renders objects whose shape this page does not know (the
// audit log, channels): one column per key.
function genericTable(items) {
  const keys = [];
  for (const it of items.slice(0, 50)) for (const k of Object.keys(it || {})) if (!keys.includes(k)) keys.push(k);
  const cell = (v) => {
    if (v === null || v === undefined) return '';
    if (typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v)) return timeEl(v);
    if (typeof v === 'object') return h('span', { class: 'mono small', text: JSON.stringify(v) });
    return String(v);
  };
  return table(keys, items.map((it) => h('tr', null, keys.map((k) => h('td', null, cell(it[k]))))));
}

// --------------------------------------------------------------- cluster

function clusterTabs(name, current) {
  const t = (href, label, key) => h('li', null, h('a', { href, text: label, 'aria-current': key === current ? 'page' : null }));
  return h('nav', { 'aria-label': `Cluster ${name}` }, h('ul', { class: 'tabs' },
    t(`#/clusters/${enc(name)}`, 'Upgrade', 'upgrade'),
    t(`#/clusters/${enc(name)}/maintenance`, 'Maintenance policy', 'maintenance'),
    t(`#/clusters/${enc(name)}/preflight`, 'Preflight runs', 'preflight')));
}

const roleLabel = {
  controlPlaneLB: 'Control-plane load balancers',
  controlPlane: 'Control plane, one node at a time',
  loadBalancer: 'Load-balancer nodes',
  worker: 'Worker pool',
};

function stepLabel(s) {
  switch (s.kind) {
    case 'pool': return `${roleLabel[s.role] || s.role} (pool ${s.pool})`;
    case 'addons': return 'Cluster add-ons';
    case 'lifecycle': return 'Lifecycle components';
    case 'health': return 'Cluster health checks';
    default: return s.id;
  }
}

function nodeStepLabel(ns) {
  if (!ns) return '';
  if (ns.op) {
    const k = { ImportImages: 'import images', UpgradeStaticPods: 'upgrade static pods', UpgradeBinary: 'upgrade' }[ns.op.kind] || ns.op.kind;
    return ns.op.component ? `${k} ${ns.op.component}` : k;
  }
  return { waitReady: 'wait Ready', createReplacement: 'create replacement', deleteInstance: 'delete instance', recreateInstance: 'recreate instance', waitReplacement: 'wait for replacement', undoReplacement: 'undo replacement' }[ns.kind] || ns.kind;
}

// nodeStepName names a node's step as the coordinator reads it off the
// node's cursor (n.step: "drain", "operation:UpgradeBinary:kubelet").
function nodeStepName(s) {
  if (!s) return '';
  const [kind, op, component] = s.split(':');
  return nodeStepLabel(op ? { kind, op: { kind: op, component } } : { kind });
}

// forecastEl shows the coordinator's forecast f of a running upgrade's end
// (GET .../upgrade's forecast, null: none; undefined: not read). What is
// left is f.end - f.at, both on the coordinator's clock, so a browser's
// skewed clock does not move it.
function forecastEl(u, f) {
  if (u.state !== 'running' || f === undefined) return '';
  if (f === null) return h('span', { id: 'forecast', text: 'no estimate: a failed node holds its pool (retry it)' });
  const left = ms(f.end) - ms(f.at);
  return h('span', { id: 'forecast', 'data-end': f.end, 'data-left-ms': String(left),
    text: u.pauseReason ? `${fmtDur(left)} once it resumes` : `${fmtDur(left)} left (${fmtTime(f.end)})` });
}

function stepsOf(pt, n) {
  return [pt.nodeSteps, pt.unavailableSteps, pt.rollbackSteps][n.path || 0] || pt.nodeSteps || [];
}

const bgPhases = ['CREATING_GREEN_POOL', 'CORDONING_BLUE_POOL', 'DRAINING_BLUE_POOL', 'NODE_POOL_SOAKING', 'DELETING_BLUE_POOL', 'COMPLETED'];

// timeline lays bars over [from, to): each item {label, start, end, state}.
function lanes(from, to, items, shades) {
  const span = Math.max(1, to - from);
  const pos = (t) => Math.min(100, Math.max(0, ((t - from) / span) * 100));
  const lane = (it) => {
    const ln = h('div', { class: 'lane', role: 'img', 'aria-label': it.aria });
    for (const s of shades || []) {
      const sh = h('div', { class: 'shade' });
      sh.style.left = `${pos(ms(s.start))}%`;
      sh.style.width = `${Math.max(0, pos(ms(s.end)) - pos(ms(s.start)))}%`;
      ln.append(sh);
    }
    if (it.start) {
      const b = h('div', { class: `bar ${it.cls || ''}` });
      b.style.left = `${pos(it.start)}%`;
      b.style.width = `${Math.max(0.3, pos(it.end) - pos(it.start))}%`;
      ln.append(b);
    }
    return ln;
  };
  return { lane, axis: h('div', { class: 'axis', 'aria-hidden': 'true' }, h('span', { text: fmtTime(new Date(from).toISOString()) }), h('span', { text: fmtTime(new Date(to).toISOString()) })) };
}

function stepsTimeline(c, u) {
  const now = Date.now();
  const from = ms(u.createdAt);
  const to = valid(u.finishedAt) ? ms(u.finishedAt) : Math.max(now, from + 60e3);
  const tl = lanes(from, to, []);
  const items = [];
  const pre = { preflight: 'running', refused: 'failed' }[u.state] || (u.preflight || u.state !== 'preflight' ? 'done' : 'pending');
  items.push({ id: 'preflight', label: 'Preflight', state: u.preflight ? pre : 'done', note: u.preflight ? h('a', { href: `#/clusters/${enc(c)}/preflight/${enc(u.preflight)}`, text: `run ${u.preflight}` }) : 'none recorded', start: from, end: u.state === 'preflight' ? now : from });
  items.push({ id: 'spec', label: `spec.version = ${u.to}`, state: ['preflight', 'refused'].includes(u.state) ? 'pending' : 'done' });
  for (const s of u.steps || []) {
    const start = valid(s.startedAt) ? ms(s.startedAt) : 0;
    const end = valid(s.finishedAt) ? ms(s.finishedAt) : now;
    const parallel = (s.deps || []).length ? `after ${s.deps.map((d) => d.replace(/^pool\//, '')).join(', ')}` : '';
    items.push({
      id: s.id, label: stepLabel(s), state: s.state, start, end, cls: `s-${s.state}`,
      note: [parallel, start && `${fmtTime(s.startedAt)}${valid(s.finishedAt) ? ` → ${fmtTime(s.finishedAt)}` : ''} (${fmtDur(end - start)})`, s.attempts > 1 && `attempt ${s.attempts}`, s.message].filter(Boolean).join(' · '),
    });
  }
  items.push({ id: 'status', label: `status.version = ${u.to}`, state: u.state === 'done' ? 'done' : u.state === 'failed' ? 'failed' : 'pending' });
  return [
    h('ol', { class: 'steps', id: 'steps', 'aria-label': 'Upgrade steps in order' }, items.map((it, i) => h('li', { 'data-step': it.id, 'data-state': it.state },
      h('span', { class: 'n', text: `${i + 1}.` }),
      h('div', null, h('div', null, h('strong', { text: it.label }), ' ', badge(it.state)), it.note && h('div', { class: 'small muted' }, it.note)),
      tl.lane({ ...it, aria: `${it.label}: ${it.state}` })))),
    h('div', { class: 'steps-axis' }, tl.axis),
  ];
}

function poolActions(c, u, pt, out) {
  const bg = pt.strategy === 'blueGreen';
  const mig = pt.backing === 'mig';
  const where = `pool ${pt.name} of cluster ${c}`;
  const phase = pt.blueGreen && pt.blueGreen.phase;
  const run = (cmd) => () => api('POST', `${cpath(c)}/pools/${enc(pt.name)}/upgrade/${cmd}`, {});
  const btn = (cmd, label, body, cls) => h('button', {
    type: 'button', class: cls, 'data-action': `${cmd}`, 'data-pool': pt.name,
    onclick: () => act(out, { title: `${label} ${where}?`, body, yes: `${label} pool ${pt.name}`, run: run(cmd), done: () => `${label}: accepted for pool ${pt.name}.` }),
  }, label);
  const cancelBody = bg
    ? [`The blue/green upgrade of ${where} pauses in its current phase${phase ? ` (${phase})` : ''}. Nothing is created or deleted until you resume it; it cannot be paused while the blue pool is being deleted.`]
    : [`Nodes of ${where} that already started finish; no new node starts.`, `The pool may stay mixed (nodes at ${u.from} and at ${u.to}) until you resume it. A cancelled upgrade whose pools are all cancelled ends cancelled.`];
  // Only the commands that may apply where the pool is; the coordinator
  // still decides, and its refusal is shown.
  const stepState = ((u.steps || []).find((s) => s.kind === 'pool' && s.pool === pt.name) || {}).state || 'pending';
  const finished = ['done', 'rolledBack'].includes(stepState);
  const b = [];
  if (!finished && !pt.cancelled && stepState !== 'cancelled') b.push(btn('cancel', 'Cancel', cancelBody, 'danger'));
  if (pt.cancelled || stepState === 'cancelled') {
    b.push(btn('resume', 'Resume', [`The upgrade of ${where} goes on${bg ? ' from its phase' : ': nodes not upgraded yet start again within the pool\u2019s budget'}. Refused when the cluster was registered again since the cancel.`]));
  }
  if (mig && !finished && !pt.rollingBack) {
    b.push(btn('rollback', 'Roll back', bg
      ? [`${where}: draining stops, the blue nodes are uncordoned, the green groups are deleted and blue\u2019s autoscaling range is restored. Refused once blue is being deleted or the pool finished.`]
      : [`Every node of ${where} this upgrade touched goes back to ${u.from}, zones in reverse order, within the same surge budget. A node whose replacement exists but was not replaced yet loses its replacement and is uncordoned. Refused once the pool finished.`], 'danger'));
  }
  if (bg && phase === 'NODE_POOL_SOAKING') {
    b.push(btn('complete', 'Complete', [`The soak of ${where} ends now and the blue pool is deleted: pods left on blue are deleted (not evicted: PodDisruptionBudgets do not hold them, grace capped at 60 minutes), then the blue groups and their nodes. This phase cannot be paused. Allowed only while the pool soaks.`], 'danger'));
  }
  return b.length ? h('div', { class: 'row' }, b) : h('p', { class: 'muted small', text: 'No pool command applies now.' });
}

function poolCard(c, u, pt, out) {
  const nodes = (u.nodes || []).slice(pt.first, pt.first + pt.count);
  const count = {};
  for (const n of nodes) count[n.state] = (count[n.state] || 0) + 1;
  const step = (u.steps || []).find((s) => s.kind === 'pool' && s.pool === pt.name);
  const done = count.done || 0;
  const facts = [
    ['Role', pt.role],
    ['Backing', pt.backing === 'mig' ? `managed instance groups, ${pt.strategy === 'blueGreen' ? 'blue/green' : 'surge'}` : 'bare metal, in place'],
    pt.backing === 'mig' && pt.strategy !== 'blueGreen' ? ['Budget', `maxSurge ${pt.maxSurge || 0}, maxUnavailable ${pt.maxUnavailable || 0} per zone`] : null,
    pt.backing !== 'mig' ? ['Budget', `${pt.concurrency} at once, at least ${pt.minAvailable} available`] : null,
    pt.groups && pt.groups.length ? ['Groups', pt.groups.map((g) => `${g.zone}/${g.name}`).join(', ')] : null,
    ['Nodes', Object.entries(count).map(([k, v]) => `${v} ${k}`).join(', ')],
  ];
  const bgt = pt.blueGreen;
  let bgView = null;
  if (bgt) {
    const cur = bgPhases.indexOf(bgt.phase);
    bgView = [
      h('h4', { class: 'small', text: 'Blue/green phases' }),
      h('ol', { class: 'phases', 'aria-label': `Blue/green phases of pool ${pt.name}` }, bgPhases.map((ph, i) => h('li', {
        class: ph === bgt.phase ? 'current' : cur > i ? 'past' : null, 'aria-current': ph === bgt.phase ? 'step' : null, text: ph,
      })), bgPhases.includes(bgt.phase) ? null : h('li', { class: 'current', 'aria-current': 'step', text: bgt.phase })),
      dl([
        ['Phase since', timeEl(bgt.phaseStartedAt)],
        ['Batch', bgt.batchSize ? `${bgt.batch} (batches of ${bgt.batchSize}, soak ${bgt.batchSoak})` : ''],
        ['Batch soak until', timeEl(bgt.batchSoakUntil)],
        ['Pool soak', `${bgt.poolSoak}${valid(bgt.soakUntil) ? `, until ${fmtTime(bgt.soakUntil)}` : ''}`],
        ['Waiting', bgt.waiting ? `${bgt.waiting}${valid(bgt.retryAt) ? `, retry at ${fmtTime(bgt.retryAt)}` : ''}` : ''],
        ['Message', bgt.message || ''],
        ['Green', (bgt.green || []).map((g) => `${g.zone}/${g.name} (${(g.nodes || []).length} nodes)`).join(', ')],
        ['Rollback from', bgt.rollbackFrom || ''],
      ]),
    ];
  }
  return h('div', { class: 'card', 'data-pool': pt.name, 'data-state': step ? step.state : '' },
    h('h3', null, `Pool ${pt.name} `, badge(step ? step.state : 'pending'), pt.cancelled ? [' ', badge('cancelled', 'cancel requested')] : null, pt.rollingBack ? [' ', badge('ROLLBACK_STARTED', 'rolling back')] : null),
    h('div', null, h('progress', { max: nodes.length || 1, value: done, 'aria-label': `Pool ${pt.name}: ${done} of ${nodes.length} nodes upgraded` }), ` ${done} of ${nodes.length} nodes upgraded`),
    dl(facts), bgView, poolActions(c, u, pt, out));
}

const PAGE = 50;

function nodeTable(c, u, agents, ctl, out) {
  const pools = new Map((u.pools || []).map((p) => [p.name, p]));
  const q = ctl.search.value.trim().toLowerCase();
  const pool = ctl.pool.value;
  const state = ctl.state.value;
  const rows = [];
  for (const n of u.nodes || []) {
    if (pool && n.pool !== pool) continue;
    if (state && n.state !== state) continue;
    if (q && !n.node.toLowerCase().includes(q)) continue;
    rows.push(n);
  }
  const pages = Math.max(1, Math.ceil(rows.length / PAGE));
  ctl.page = Math.min(ctl.page, pages - 1);
  const slice = rows.slice(ctl.page * PAGE, ctl.page * PAGE + PAGE);
  const key = [u.id, u.revision, q, pool, state, ctl.page, slice.map((n) => agents.get(n.node))];
  const build = () => {
    const body = slice.map((n) => {
      const pt = pools.get(n.pool) || {};
      const steps = stepsOf(pt, n);
      const k = n.state === 'done' ? steps.length : Math.min(n.cursor, steps.length);
      const cur = n.state === 'running' || n.state === 'failed' ? nodeStepName(n.step) : n.state === 'done' ? 'done' : '';
      const a = agents.get(n.node);
      const notes = [
        n.waiting && `waiting: ${n.waiting}${valid(n.retryAt) ? ` (retry ${fmtTime(n.retryAt)})` : ''}`,
        valid(n.protectedUntil) && `protected pods until ${fmtTime(n.protectedUntil)}`,
        n.replacement && `replacement ${n.replacement}`,
        n.current && n.current !== n.node && `now ${n.current}`,
        n.rollback && 'rolling back',
        n.error && `error: ${n.error}`,
      ].filter(Boolean);
      return h('tr', { 'data-node': n.node, 'data-state': n.state },
        h('th', { scope: 'row', class: 'mono', text: n.node }),
        h('td', { text: n.pool }),
        h('td', null, badge(n.state)),
        h('td', null, h('progress', { max: steps.length || 1, value: k, 'aria-label': `${n.node}: step ${k} of ${steps.length}` }), ` ${k}/${steps.length} `, h('span', { class: 'small', text: cur })),
        h('td', { class: 'num', text: n.attempt ? n.attempt + 1 : '' }), // attempts count from 1 here, from 0 on the wire
        h('td', { class: 'mono', text: n.version }),
        h('td', { class: 'small' }, timeEl(n.startedAt)),
        h('td', { class: 'small', text: (a ? (a.missing ? 'missing' : a.healthy ? 'healthy' : a.registered ? 'unhealthy' : 'not registered') : 'not registered') + (a && a.agentVersion ? ` · molt ${a.agentVersion}` : '') + (a && a.drift ? ` · drift: ${a.drift}` : '') }),
        h('td', { class: 'small', text: [n.zone, ...notes].filter(Boolean).join(' · ') }),
        h('td', { class: 'num', text: (n.leftBehind || []).length || '' }),
        h('td', null, n.state === 'failed' ? h('button', {
          type: 'button', 'data-action': 'retry', 'data-node': n.node,
          onclick: () => act(out, {
            title: `Retry node ${n.node}?`, yes: `Retry node ${n.node}`,
            body: [`Node ${n.node} of pool ${n.pool} (cluster ${c}) failed at “${nodeStepName(n.step)}”${n.error ? `: ${n.error}` : ''}.`, `It gets attempt ${(n.attempt || 0) + 2} at that step; its pool, halted by the failure, goes on.`],
            run: () => api('POST', `${cpath(c)}/nodes/${enc(n.node)}/retry`, {}), done: () => `Node ${n.node}: retry accepted.`,
          }),
        }, 'Retry') : ''));
    });
    return [
      h('div', { class: 'pager' },
        h('button', { type: 'button', 'data-action': 'previous-page', disabled: ctl.page === 0, onclick: () => { ctl.page--; ctl.redraw(); }, text: 'Previous' }),
        h('span', { 'aria-live': 'polite', text: `${rows.length} node${rows.length === 1 ? '' : 's'}; page ${ctl.page + 1} of ${pages}` }),
        h('button', { type: 'button', 'data-action': 'next-page', disabled: ctl.page >= pages - 1, onclick: () => { ctl.page++; ctl.redraw(); }, text: 'Next' })),
      table(['Node', 'Pool', 'State', 'Progress', 'Attempt', 'Version', 'Started', 'Agent', 'Notes', 'Left behind', ''], body, { id: 'nodes', 'aria-label': 'Nodes of the upgrade' }),
    ];
  };
  return { key, build };
}

function leftBehind(u) {
  const pods = [];
  for (const n of u.nodes || []) for (const p of n.leftBehind || []) pods.push({ ...p, node: n.node });
  if (!pods.length) return h('p', { class: 'muted', text: 'No drain has left a pod behind.' });
  const shown = pods.slice(0, 200);
  return [
    table(['Pod', 'Node', 'Reason', 'Evictable at'], shown.map((p) => h('tr', null, h('td', { class: 'mono', text: `${p.namespace}/${p.name}` }), h('td', { class: 'mono', text: p.node }), h('td', { text: p.reason }), h('td', null, timeEl(p.evictableAt)))), { id: 'left-behind' }),
    pods.length > shown.length ? h('p', { class: 'muted', text: `${pods.length - shown.length} more not shown.` }) : null,
  ];
}

async function planView(c, plan) {
  const from = ms(plan.start);
  const to = Math.max(ms(plan.end), from + 60e3);
  let shades = [];
  let windowNote = '';
  try {
    const days = Math.min(92, Math.max(1, Math.ceil((to - from) / DAY)));
    const cal = await api('GET', `${cpath(c)}/maintenance-policy/calendar?from=${enc(plan.start)}&days=${days}`);
    shades = cal.window || [];
    windowNote = 'Shaded: the maintenance window is open. A manual upgrade does not wait for it; an automatic one starts steps only inside it and outside exclusions. The predicted times below do not include that wait.';
  } catch (p) {
    windowNote = `Maintenance windows could not be read: ${p.detail || p.title}`;
  }
  const tl = lanes(from, to, [], shades);
  const rows = (plan.steps || []).map((s, i) => {
    const nodes = (s.batches || []).reduce((n, b) => n + (b.nodes || []).length, 0);
    const details = [
      s.batches && s.batches.length ? `${s.batches.length} batch${s.batches.length === 1 ? '' : 'es'}, ${nodes} node${nodes === 1 ? '' : 's'}` : '',
      s.strategy && `strategy ${s.strategy}`,
      s.sizeRange && `pool size ${s.sizeRange.min}–${s.sizeRange.max}`,
      s.soak && `soak ${fmtDur(s.soak.total / NS)}${s.soak.capped ? ' (capped at 7 days)' : ''}`,
    ].filter(Boolean).join(' · ');
    return h('li', { 'data-plan-step': s.id },
      h('span', { class: 'n', text: `${i + 1}.` }),
      h('div', null, h('strong', { text: stepLabel(s) }),
        h('div', { class: 'small muted', text: `${fmtTime(s.start)} → ${fmtTime(s.end)} (${fmtDur(ms(s.end) - ms(s.start))})` }),
        details && h('div', { class: 'small', text: details }),
        h('div', { class: 'small', text: `Disruption: ${s.disruption}` }),
        s.phases && s.phases.length ? h('div', { class: 'small', text: s.phases.map((p) => `${p.phase} ${fmtDur(ms(p.end) - ms(p.start))}`).join(' → ') } ) : null),
      tl.lane({ start: ms(s.start), end: ms(s.end), cls: 'plan', aria: `${stepLabel(s)}: ${fmtTime(s.start)} to ${fmtTime(s.end)}` }));
  });
  return [
    h('h2', { text: `Dry run: ${plan.from} → ${plan.to}` }),
    dl([['Starts', timeEl(plan.start)], ['Ends', timeEl(plan.end)], ['Predicted', fmtDur(plan.total / NS)], ['Critical path (lower bound)', fmtDur(plan.criticalPath / NS)]]),
    h('p', { class: 'small muted', text: windowNote }),
    h('ol', { class: 'steps', id: 'plan', 'aria-label': 'Planned steps with their predicted timeline' }, rows),
    tl.axis,
  ];
}

function clusterPage(name) {
  const error = region();
  const summary = region({ id: 'summary' });
  const why = region({ id: 'why' });
  const upgrade = region({ id: 'upgrade' });
  const timeline = region();
  const pools = region({ id: 'pools', class: 'cards' });
  const nodes = region();
  const left = region();
  const history = region();
  const plan = h('div', { id: 'plan-view' });
  const out = h('div', { id: 'action-result', 'aria-live': 'polite' });

  const version = h('select', { id: 'target-version' });
  const workers = h('input', { id: 'worker-pools', type: 'number', min: '0', max: '100', value: '0', inputmode: 'numeric' });
  let data = null;
  const startReq = () => ({ version: version.value, concurrentWorkerPools: Number(workers.value) || 0 });
  const actions = h('section', { 'aria-labelledby': 'actions-h' },
    h('h2', { id: 'actions-h', text: 'Actions' }),
    h('div', { class: 'row' },
      h('div', null, h('label', { for: 'target-version', text: 'Target version' }), version),
      h('div', null, h('label', { for: 'worker-pools', text: 'Worker pools at once (0: one)' }), workers),
      h('button', {
        type: 'button', id: 'plan-btn', 'data-action': 'plan',
        onclick: () => act(out, {
          title: `Plan an upgrade of ${name} to ${version.value}?`, yes: 'Plan (dry run)',
          body: [`The coordinator computes the steps, node batches and a predicted timeline of an upgrade of cluster ${name} from ${data ? data.status.version : '?'} to ${version.value}, with the disruption each step causes. Nothing changes.`],
          run: async () => {
            const p = await api('POST', `${cpath(name)}/upgrade`, { ...startReq(), dryRun: true });
            plan.replaceChildren(...await planView(name, p));
            return p;
          },
          done: (p) => `Dry run: ${p.steps.length} steps, predicted ${fmtDur(p.total / NS)}.`,
        }),
      }, 'Plan (dry run)…'),
      h('button', {
        type: 'button', id: 'start-btn', class: 'primary', 'data-action': 'start',
        onclick: () => act(out, {
          title: `Upgrade ${name} to ${version.value}?`, yes: `Start upgrade to ${version.value}`,
          body: [
            `A manual upgrade of cluster ${name} from ${data ? data.status.version : '?'} to ${version.value} starts now. Preflight runs first; if no blocking check fails, spec.version becomes ${version.value} and the steps run in order: control-plane load balancers, the control plane one node at a time, add-ons and load-balancer nodes, then worker pools (${Number(workers.value) || 1} at once).`,
            'Each node is cordoned, drained best effort (at most 20 minutes; pods left behind are recorded), upgraded by its agent and uncordoned. A manual upgrade does not wait for maintenance windows.',
          ],
          run: () => api('POST', `${cpath(name)}/upgrade`, startReq()),
          done: (u) => `Upgrade ${u.id} accepted: ${u.state}.`,
        }),
      }, 'Start upgrade…')),
    roleHint(), out, plan);

  const ctl = { page: 0, search: h('input', { id: 'node-search', type: 'search', placeholder: 'name contains' }), pool: h('select', { id: 'node-pool' }), state: h('select', { id: 'node-state' }) };
  for (const s of ['', 'pending', 'running', 'done', 'failed', 'cancelled', 'rolledBack']) ctl.state.append(h('option', { value: s, text: s || 'any state' }));
  ctl.redraw = () => { if (data) drawNodes(); };
  for (const x of [ctl.search, ctl.pool, ctl.state]) x.addEventListener('input', () => { ctl.page = 0; ctl.redraw(); });
  const drawNodes = () => {
    const u = data.status.upgrade;
    const agents = new Map((data.status.agents || []).map((a) => [a.node, a]));
    const t = nodeTable(name, u, agents, ctl, out);
    nodes.show(t.key, t.build);
  };
  let lastState = '';
  let whyAt = 0;
  let marked = false;
  const upgradeSection = h('section', { 'aria-labelledby': 'upgrade-h' }, h('h2', { id: 'upgrade-h', text: 'Upgrade' }), upgrade, timeline,
    h('h2', { text: 'Pools' }), pools,
    h('h2', { id: 'nodes-h', text: 'Nodes' }),
    h('div', { class: 'row', role: 'search', 'aria-label': 'Filter nodes' },
      h('div', null, h('label', { for: 'node-search', text: 'Node' }), ctl.search),
      h('div', null, h('label', { for: 'node-pool', text: 'Pool' }), ctl.pool),
      h('div', null, h('label', { for: 'node-state', text: 'State' }), ctl.state)),
    nodes,
    h('h2', { text: 'Pods left behind by drains' }), left);
  const el = h('section', null, h('h1', null, 'Cluster ', h('span', { class: 'mono', text: name })), clusterTabs(name, 'upgrade'), error, summary, why, actions, upgradeSection, h('h2', { text: 'History' }), history);

  return {
    title: `Cluster ${name}`, el, error,
    async refresh() {
      const [c, rels] = await Promise.all([api('GET', cpath(name)), releases()]);
      data = c;
      const u = c.status.upgrade;
      summary.show([c.spec.name, c.spec.kind, c.spec.channel, c.spec.adminCluster, c.spec.version, c.status.version, c.status.versions, c.status.appliedManifestsVersion, c.status.recordedVersion, (c.status.agents || []).map((a) => [a.registered, a.missing, a.healthy, a.drift])], () => {
        const agents = c.status.agents || [];
        const nodeCount = (c.spec.pools || []).reduce((n, p) => n + (p.nodes || []).length, 0);
        return dl([
          ['Kind', c.spec.kind + (c.spec.adminCluster ? ` (admin cluster ${c.spec.adminCluster})` : '')],
          ['Channel', c.spec.channel || 'none'],
          ['Current version', h('span', { class: 'mono', id: 'current-version', text: c.status.version + (c.status.recordedVersion ? ` (observed; molt recorded ${c.status.recordedVersion})` : '') })],
          ['Target version', h('span', { class: 'mono', id: 'spec-version', text: c.spec.version })],
          ['Nodes per version', Object.entries(c.status.versions || {}).map(([v, n]) => `${v}: ${n}`).join(', ')],
          ['Add-on manifests', c.status.appliedManifestsVersion || ''],
          ['Agents', `${agents.filter((a) => a.registered && !a.missing).length} of ${nodeCount} reporting, ${agents.filter((a) => a.missing).length} missing, ${agents.filter((a) => a.registered && !a.missing && !a.healthy).length} unhealthy`],
          ['Pools', (c.spec.pools || []).map((p) => `${p.name} (${p.role}, ${(p.nodes || []).length})`).join(', ')],
          // A node whose agent reports other versions than molt recorded
          // (api AgentStatus.drift) blocks automatic upgrades.
          ...(agents.some((a) => a.drift) ? [['Version drift', h('span', { id: 'version-drift', text: agents.filter((a) => a.drift).map((a) => `${a.node}: ${a.drift}`).join('; ') })]] : []),
        ]);
      });
      if (st.routes.why !== false && Date.now() - whyAt > 5000) {
        whyAt = Date.now();
        const w = await optional('why', `${cpath(name)}/upgrade-status`).catch((p) => ({ problem: p }));
        why.show(w, () => (w ? [h('h2', { text: 'Why (not) upgrading' }), w.problem ? problemBox(w.problem) : [whyCell(w), genericDl(w)]] : null));
      }
      const choices = rels.map((r) => r.version).filter((v) => cmpVersion(v, c.status.version) > 0).sort(cmpVersion);
      if (version.dataset.key !== choices.join()) {
        const keep = version.value;
        version.replaceChildren(...choices.map((v) => h('option', { value: v, text: v })));
        if (choices.includes(keep)) version.value = keep;
        else if (choices.length) version.value = choices[choices.length - 1];
        version.dataset.key = choices.join();
      }
      if (!u) {
        upgrade.show('none', () => h('p', { class: 'notice', text: 'This cluster has not been upgraded yet.' }));
        timeline.show('none', () => null);
        pools.show('none', () => null);
        nodes.show('none', () => null);
        left.show('none', () => null);
      } else {
        if (lastState && lastState !== u.state) announce(`Upgrade ${u.id}: ${u.state}`);
        lastState = u.state;
        const rev = [u.id, u.revision, u.state];
        // The forecast rides only on GET .../upgrade, made as the
        // coordinator answers; without it the page shows none.
        const forecast = u.state === 'running' ? await api('GET', `${cpath(name)}/upgrade`).then((x) => (x.id === u.id ? x.forecast || null : undefined), () => undefined) : undefined;
        upgrade.show([rev, forecast && forecast.end], () => [
          h('p', null, badge(u.state), ' ', h('span', { class: 'mono', text: `${u.from} → ${u.to}` }), ' ', h('span', { class: 'muted small', text: `upgrade ${u.id}${u.options && u.options.automatic ? ', automatic' : ', manual'}` })),
          dl([
            ['Started', timeEl(u.createdAt)],
            ['Finished', timeEl(u.finishedAt)],
            ['Paused', u.pauseReason ? `${u.pauseReason} since ${fmtTime(u.pausedAt)}` : ''],
            ['Failing', u.failing ? `nothing new starts: ${u.failing}` : ''],
            ['Expected end', forecastEl(u, forecast)],
            ['Refused by', (u.refusedChecks || []).join(', ')],
            ['Emergency', u.options && u.options.emergencyReason],
            ['Closed', u.closed ? 'the cluster changed after this upgrade was cancelled: it cannot be resumed' : ''],
          ]),
        ]);
        timeline.show([rev, Math.floor(Date.now() / 10000)], () => stepsTimeline(name, u));
        pools.show(rev, () => (u.pools || []).map((pt) => poolCard(name, u, pt, out)));
        const names = (u.pools || []).map((p) => p.name);
        if (ctl.pool.dataset.key !== names.join()) {
          const keep = ctl.pool.value;
          ctl.pool.replaceChildren(h('option', { value: '', text: 'any pool' }), ...names.map((n) => h('option', { value: n, text: n })));
          ctl.pool.value = names.includes(keep) ? keep : '';
          ctl.pool.dataset.key = names.join();
        }
        drawNodes();
        left.show(rev, () => leftBehind(u));
      }
      history.show(c.status.history || [], () => ((c.status.history || []).length
        ? table(['Upgrade', 'From', 'To', 'State', 'Started', 'Finished'], c.status.history.slice().reverse().map((x) => h('tr', null, h('td', { class: 'mono', text: x.id }), h('td', { class: 'mono', text: x.from }), h('td', { class: 'mono', text: x.to }), h('td', null, badge(x.state)), h('td', null, timeEl(x.createdAt)), h('td', null, timeEl(x.finishedAt)))))
        : h('p', { class: 'muted', text: 'No finished upgrade.' })));
      if (!marked) {
        marked = true;
        performance.mark('molt:cluster-rendered');
      }
    },
  };
}

function genericDl(o) {
  const known = ['state', 'blockedBy', 'nextOpportunity', 'problem', 'sequence'];
  return dl(Object.entries(o).filter(([k]) => !known.includes(k)).map(([k, v]) => [k,
    typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? timeEl(v) : typeof v === 'object' && v !== null ? h('span', { class: 'mono small', text: JSON.stringify(v) }) : String(v ?? '')]));
}

// ----------------------------------------------------------- maintenance

function maintenancePage(name) {
  const error = region();
  const policyView = region({ id: 'policy' });
  const checkView = region({ id: 'check' });
  const calView = region({ id: 'calendar' });
  const target = h('select', { id: 'change-target' }, h('option', { value: 'nodes', text: 'nodes' }), h('option', { value: 'controlPlane', text: 'control plane' }));
  const change = h('select', { id: 'change-kind' }, h('option', { value: 'patch', text: 'patch' }), h('option', { value: 'minor', text: 'minor' }), h('option', { value: 'disruption', text: 'disruption' }));
  let page;
  for (const s of [target, change]) s.addEventListener('change', () => kick());
  const el = h('section', null, h('h1', null, 'Cluster ', h('span', { class: 'mono', text: name })), clusterTabs(name, 'maintenance'), error,
    h('h2', { text: 'Maintenance policy' }), policyView,
    h('h2', { text: 'Next 60 days (UTC)' }),
    h('div', { class: 'row', role: 'group', 'aria-label': 'Which automatic change' },
      h('div', null, h('label', { for: 'change-target', text: 'Change to' }), target),
      h('div', null, h('label', { for: 'change-kind', text: 'Kind' }), change)),
    checkView, calView);
  page = {
    title: `Maintenance · ${name}`, el, error, every: 15000,
    async refresh() {
      const today = new Date();
      const from = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()));
      const [pol, cal, chk] = await Promise.all([
        api('GET', `${cpath(name)}/maintenance-policy`),
        api('GET', `${cpath(name)}/maintenance-policy/calendar?from=${enc(from.toISOString().replace('.000Z', 'Z'))}&days=60`),
        api('GET', `${cpath(name)}/maintenance-policy/check?target=${enc(target.value)}&change=${enc(change.value)}`),
      ]);
      policyView.show(pol, () => {
        const w = pol.window;
        const rows = [
          ['Window', w ? `${fmtTime(w.start)} → ${fmtTime(w.end)} (${fmtDur(ms(w.end) - ms(w.start))} each time)` : 'none: always open, only exclusions restrict automatic upgrades'],
          w ? ['Recurrence', h('span', { class: 'mono', text: w.recurrence || 'none (one-off)' })] : null,
        ];
        const ex = pol.exclusions || [];
        return [dl(rows), ex.length
          ? table(['Exclusion', 'Scope', 'From', 'Until', ''], ex.map((e) => h('tr', { 'data-exclusion': e.name }, h('th', { scope: 'row', text: e.name }), h('td', { class: 'mono', text: e.scope || 'no_upgrades' }), h('td', null, timeEl(e.start)), h('td', null, timeEl(e.end)), h('td', { class: 'small', text: ms(e.end) <= Date.now() ? 'over' : ms(e.start) <= Date.now() ? 'active' : '' }))), { 'aria-label': 'Exclusions' })
          : h('p', { class: 'muted', text: 'No exclusion.' })];
      });
      checkView.show([chk, target.value, change.value], () => h('div', { class: chk.allowed ? 'ok-note' : 'notice', role: 'status' },
        chk.allowed ? `An automatic ${change.value} change of the ${target.value === 'nodes' ? 'nodes' : 'control plane'} may run now.`
          : `An automatic ${change.value} change of the ${target.value === 'nodes' ? 'nodes' : 'control plane'} may not run now: blocked by ${(chk.blockedBy || []).join(', ')}${chk.pauseReason ? ` (${chk.pauseReason})` : ''}.`,
        ' ', valid(chk.nextOpportunity) ? h('span', { id: 'next-opportunity' }, 'Next opportunity: ', timeEl(chk.nextOpportunity), '.') : chk.allowed ? '' : 'No opportunity within two years.',
        h('div', { class: 'small muted', text: 'Manual upgrades do not wait for windows or exclusions.' })));
      calView.show([cal, chk.nextOpportunity, target.value, change.value], () => calendar(cal, chk, target.value, change.value));
    },
  };
  return page;
}

// scopeBlocks: does an exclusion of this scope block an automatic change
// of kind on target? SPEC §9's table, as maintenance.Scope.Blocks has it;
// an unknown scope, target or kind blocks (fail closed).
function scopeBlocks(scope, target, kind) {
  if (!['nodes', 'controlPlane'].includes(target) || !['minor', 'patch', 'disruption'].includes(kind)) return true;
  switch (scope || 'no_upgrades') {
    case 'no_minor_upgrades': return kind === 'minor';
    case 'no_minor_or_node_upgrades': return kind === 'minor' || target === 'nodes';
    default: return true;
  }
}

// calendar draws the window and the exclusions day by day; an exclusion
// that blocks the chosen change (target, kind) is hatched, one that lets
// it through is only outlined, and both say which in words.
function calendar(cal, chk, target, kind) {
  const change = `${target === 'nodes' ? 'nodes' : 'control-plane'} ${kind}`;
  const exclusions = (cal.exclusions || []).map((e) => ({ ...e, scope: e.scope || 'no_upgrades', blocks: scopeBlocks(e.scope, target, kind) }));
  const how = (e) => `${e.name} (${e.scope}, ${e.blocks ? 'blocks' : 'does not block'} a ${change} change)`;
  const from = ms(cal.from);
  const to = ms(cal.to);
  const days = Math.round((to - from) / DAY);
  const next = valid(chk.nextOpportunity) ? ms(chk.nextOpportunity) : NaN;
  const todayStart = Math.floor(Date.now() / DAY) * DAY;
  const cells = [];
  for (const d of ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun']) cells.push(h('div', { class: 'dow', 'aria-hidden': 'true', text: d }));
  const lead = (new Date(from).getUTCDay() + 6) % 7;
  for (let i = 0; i < lead; i++) cells.push(h('div', { 'aria-hidden': 'true' }));
  const pct = (t, d0) => `${((t - d0) / DAY) * 100}%`;
  for (let i = 0; i < days; i++) {
    const d0 = from + i * DAY;
    const d1 = d0 + DAY;
    const bar = h('div', { class: 'hours' });
    const said = [];
    for (const s of cal.window || []) {
      const a = Math.max(ms(s.start), d0), b = Math.min(ms(s.end), d1);
      if (b <= a) continue;
      const seg = h('div', { class: 'seg window' });
      seg.style.left = pct(a, d0); seg.style.width = pct(b - a + d0, d0);
      bar.append(seg);
      said.push(`window ${fmtHM(a)}–${b === d1 ? '24:00' : fmtHM(b)}`);
    }
    for (const e of exclusions) {
      const a = Math.max(ms(e.start), d0), b = Math.min(ms(e.end), d1);
      if (b <= a) continue;
      const seg = h('div', { class: `seg excl${e.blocks ? '' : ' soft'}`, 'data-exclusion': e.name, 'data-blocks': String(e.blocks), title: how(e) });
      seg.style.left = pct(a, d0); seg.style.width = pct(b - a + d0, d0);
      bar.append(seg);
      said.push(`exclusion ${how(e)}`);
    }
    let isNext = false;
    if (next >= d0 && next < d1) {
      isNext = true;
      const m = h('div', { class: 'seg next', id: 'next-marker' });
      m.style.left = pct(next, d0);
      bar.append(m);
      said.push(`next opportunity ${fmtHM(next)}`);
    }
    const date = new Date(d0);
    const label = `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`;
    cells.push(h('div', { class: `day${d0 === todayStart ? ' today' : ''}${isNext ? ' next' : ''}`, role: 'listitem', 'data-day': label, 'aria-label': `${label}: ${said.join('; ') || 'closed'}` },
      h('div', { class: 'date', text: `${isNext ? '★ ' : ''}${label.slice(5)}` }), bar));
  }
  return [
    h('div', { class: 'legend', 'aria-hidden': 'true' },
      h('span', null, h('span', { class: 'swatch window' }), 'window open'),
      h('span', null, h('span', { class: 'swatch excl' }), `exclusion that blocks a ${change} change`),
      h('span', null, h('span', { class: 'swatch excl soft' }), 'exclusion that does not'),
      h('span', null, h('span', { class: 'swatch next' }), 'next opportunity (★)'),
      h('span', { class: 'muted', text: 'each bar is one day, 00:00–24:00 UTC' })),
    h('div', { class: 'cal', role: 'list', 'aria-label': `Maintenance calendar from ${fmtTime(cal.from)} for ${days} days` }, cells),
    h('details', null, h('summary', { text: 'The window and exclusions as a list' }),
      h('ul', null, (cal.window || []).map((s) => h('li', { text: `window ${fmtTime(s.start)} → ${fmtTime(s.end)}` })),
        exclusions.map((e) => h('li', { text: `exclusion ${how(e)} ${fmtTime(e.start)} → ${fmtTime(e.end)}` })))),
  ];
}

function fmtHM(t) {
  const d = new Date(t);
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
}

// -------------------------------------------------------------- preflight

function preflightsPage(name) {
  const error = region();
  const list = region({ id: 'preflights' });
  const out = h('div', { id: 'action-result', 'aria-live': 'polite' });
  const version = h('select', { id: 'preflight-version' });
  let current = '';
  const el = h('section', null, h('h1', null, 'Cluster ', h('span', { class: 'mono', text: name })), clusterTabs(name, 'preflight'), error,
    h('h2', { text: 'Run preflight' }),
    h('div', { class: 'row' },
      h('div', null, h('label', { for: 'preflight-version', text: 'For an upgrade to' }), version),
      h('button', {
        type: 'button', 'data-action': 'preflight',
        onclick: () => act(out, {
          title: `Run preflight of ${name} for ${version.value}?`, yes: 'Run preflight',
          body: [`The coordinator checks whether cluster ${name} can be upgraded from ${current} to ${version.value}: version rules, the release and its artifacts, nodes Ready, agents reporting, control-plane and etcd health, PodDisruptionBudgets and protected pods.`,
            'Every host\u2019s agent fetches the release\u2019s artifacts and checks their sha256, storing nothing, checks its free disk space, and probes up to 8 peer agents. Nothing on the cluster changes.'],
          run: () => api('POST', `${cpath(name)}/preflight`, { version: version.value }),
          done: (r) => `Preflight run ${r.id} started.`,
        }),
      }, 'Run preflight…')),
    roleHint(), out,
    h('h2', { text: 'Stored runs (newest first, the last 20)' }), list);
  return {
    title: `Preflight · ${name}`, el, error,
    async refresh() {
      const [c, runs, rels] = await Promise.all([api('GET', cpath(name)), api('GET', `${cpath(name)}/preflight`), releases()]);
      current = c.status.version;
      const choices = rels.map((r) => r.version).filter((v) => cmpVersion(v, current) > 0).sort(cmpVersion);
      if (version.dataset.key !== choices.join()) {
        version.replaceChildren(...choices.map((v) => h('option', { value: v, text: v })));
        if (choices.length) version.value = choices[choices.length - 1];
        version.dataset.key = choices.join();
      }
      list.show(runs, () => (runs.length
        ? table(['Run', 'Target', 'State', 'Verdict', 'Blocking checks', 'Hosts', 'Started', 'Finished'], runs.map((r) => h('tr', { 'data-run': r.id },
          h('th', { scope: 'row' }, h('a', { href: `#/clusters/${enc(name)}/preflight/${enc(r.id)}`, text: r.id })),
          h('td', { class: 'mono', text: r.target }), h('td', null, badge(r.state)), h('td', null, r.verdict ? badge(r.verdict) : ''),
          h('td', { text: (r.failed || []).join(', ') }), h('td', { class: 'num', text: r.hosts }), h('td', null, timeEl(r.createdAt)), h('td', null, timeEl(r.finishedAt)))), { 'aria-label': 'Preflight runs' })
        : h('p', { class: 'muted', text: 'No stored preflight run.' })));
    },
  };
}

function preflightPage(name, id) {
  const error = region();
  const view = region({ id: 'preflight' });
  const el = h('section', null, h('h1', null, 'Preflight run ', h('span', { class: 'mono', text: id })), clusterTabs(name, 'preflight'), error, view);
  return {
    title: `Preflight ${id}`, el, error,
    async refresh() {
      const r = await api('GET', `${cpath(name)}/preflight/${enc(id)}`);
      const ops = Object.values(r.operations || {}).reduce((n, o) => n + o.length, 0);
      const answered = Object.values(r.results || {}).filter((x) => x.state !== 'running').length;
      view.show([r.state, answered, r.report], () => [
        dl([['Cluster', r.cluster], ['Target', r.target], ['State', badge(r.state)], ['Verdict', r.report ? badge(r.report.verdict) : ''],
          ['Host checks answered', `${answered} of ${ops}`], ['Started', timeEl(r.createdAt)], ['Deadline', timeEl(r.deadline)], ['Finished', timeEl(r.finishedAt)]]),
        r.report ? table(['Check', 'Severity', 'Result', 'Blocks', 'Message'], r.report.results.map((x) => h('tr', { 'data-check': x.check },
          h('th', { scope: 'row', class: 'mono', text: x.check }), h('td', { text: x.severity }), h('td', null, badge(x.status)), h('td', { text: x.blocks ? 'yes' : '' }),
          h('td', null, x.message, x.data && Object.keys(x.data).length ? h('details', null, h('summary', { text: `${Object.keys(x.data).length} detail${Object.keys(x.data).length === 1 ? '' : 's'}` }),
            h('ul', { class: 'small' }, Object.entries(x.data).slice(0, 200).map(([k, v]) => h('li', null, h('span', { class: 'mono', text: k }), `: ${v}`)))) : null))), { 'aria-label': 'Checks' })
          : h('p', { class: 'notice', text: 'The run waits for hosts to answer; the report appears when every reporting agent answered or the deadline passed.' }),
      ]);
    },
  };
}

// ------------------------------------------------------------------ audit

function auditPage() {
  const error = region();
  const view = region({ id: 'audit' });
  const cluster = h('input', { id: 'audit-cluster', type: 'search', placeholder: 'all clusters' });
  cluster.addEventListener('change', () => kick());
  const el = h('section', null, h('h1', { text: 'Audit log' }), error,
    h('div', { class: 'row', role: 'search' }, h('div', null, h('label', { for: 'audit-cluster', text: 'Cluster' }), cluster)), view);
  return {
    title: 'Audit log', el, error, every: 10000,
    async refresh() {
      const q = cluster.value.trim() ? `?cluster=${enc(cluster.value.trim())}` : '';
      let data;
      try {
        data = await optional('audit', `/v1/audit${q}`);
      } catch (p) {
        if (p.status === 403) { view.show('403', () => h('p', { class: 'notice', text: `The audit log is for admins; you are signed in as ${st.me.role}. (${p.detail || ''})` })); return; }
        throw p;
      }
      if (data === null) { view.show('none', () => h('p', { class: 'notice', text: 'This coordinator does not serve an audit log (GET /v1/audit).' })); return; }
      const items = Array.isArray(data) ? data : (Object.values(data).find(Array.isArray) || []);
      view.show(data, () => (items.length ? genericTable(items) : h('p', { class: 'muted', text: 'No entry.' })));
    },
  };
}

// ------------------------------------------------------------------- start

// Hooks for the browser tests: a faster poll, and how long the last
// refresh of the page took (fetch, parse, render).
window.moltUI = { setPollInterval(v) { st.pollMs = v; kick(); }, stats: { refreshes: 0, lastRefreshMs: 0 } };

boot();
