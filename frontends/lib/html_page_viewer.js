// The viewer of an onnx-amp page (frontends/lib/html_page.h): draws the views dot laid out when the
// page was written, and shows a node's panel, the summary and the scope tree. It only reads the
// page's own JSON; it fetches nothing. window.ampPage is what the browser test drives.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('amp-data').textContent);
  const SVG = 'http://www.w3.org/2000/svg';
  const KIND_NODE = 0, KIND_SCOPE = 1, KIND_INPUT = 2, KIND_OUTPUT = 3;
  const PRECISIONS = ['fp32', 'fp16', 'bf16', 'fp64', '-'];

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function s(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function bytes(b) {
    const units = ['B', 'KB', 'MB', 'GB'];
    let u = 0;
    while (Math.abs(b) >= 1000 && u < 3) { b /= 1000; u++; }
    return (u ? b.toFixed(1) : String(b)) + ' ' + units[u];
  }
  function nodeLabel(k) { const n = D.nodes[k]; return n.name || n.ref; }
  function scopePath(sc) { return D.scopes[sc].path; }
  function relative(name, scope) {
    return scope !== '/' && name.startsWith(scope + '/') ? name.slice(scope.length + 1) : name;
  }
  function precisionBar(counts, total) {
    const bar = h('span', { class: 'pbar', title: PRECISIONS.filter((p) => counts[p]).map((p) => p + ' ' + counts[p]).join(', ') });
    for (const p of PRECISIONS) {
      if (!counts[p]) continue;
      bar.append(h('span', { class: 'p-' + p, style: 'width:' + (100 * counts[p] / total).toFixed(1) + '%' }));
    }
    return bar;
  }

  // ---- page frame ----
  const search = h('input', { id: 'search', type: 'search', placeholder: 'search node name or op', autocomplete: 'off' });
  const results = h('ul', { id: 'results', hidden: '' });
  const crumbs = h('nav', { id: 'crumbs' });
  const svg = s('svg', { id: 'graph' });
  const defs = s('defs');
  const marker = s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: '1', refY: '5', markerWidth: '8', markerHeight: '8', orient: 'auto-start-reverse' });
  marker.append(s('path', { d: 'M0,1 L9,5 L0,9 z', class: 'arrowhead' }));
  defs.append(marker);
  const vp = s('g', { id: 'viewport' });
  svg.append(defs, vp);
  const panel = h('section', { id: 'node-panel' }, h('p', { class: 'hint' }, 'Click a node to see its op, types, attributes and why it runs in its precision.'));
  const legend = h('div', { id: 'legend' }, PRECISIONS.slice(0, 4).map((p) => h('span', { class: 'key p-' + p }, p)),
    h('span', { class: 'key p--' }, 'no float data'), h('span', { class: 'key cast' }, 'Cast'));
  document.body.append(
    h('header', {}, h('h1', {}, D.title), h('div', { id: 'find' }, search, results), crumbs,
      h('button', { id: 'fit', type: 'button', onclick: () => fit() }, 'fit'), legend),
    h('main', {}, h('div', { id: 'canvas' }, svg),
      h('aside', { id: 'side' }, panel, summaryPanel(), scopeTree())));

  // ---- views ----
  let view = -1, selected = -1;
  let T = { x: 0, y: 0, k: 1 };
  const itemOf = new Map();  // node index -> its <g> in the current view

  function apply() { vp.setAttribute('transform', 'translate(' + T.x + ',' + T.y + ') scale(' + T.k + ')'); }
  function fit() {
    const v = D.views[view], r = svg.getBoundingClientRect();
    const k = Math.min(1.5, (r.width - 20) / Math.max(v.w, 1), (r.height - 20) / Math.max(v.h, 1));
    T = { k: k, x: (r.width - v.w * k) / 2, y: Math.max(10, (r.height - v.h * k) / 2) };
    apply();
  }
  function center(x, y, k) {
    const r = svg.getBoundingClientRect();
    T.k = Math.max(T.k, k);
    T.x = r.width / 2 - x * T.k;
    T.y = r.height / 2 - y * T.k;
    apply();
  }

  function midpoint(p) {
    const segments = Math.max(1, Math.floor((p.length / 2 - 1) / 3));
    const i = Math.floor(segments / 2) * 6, t = segments % 2 ? 0.5 : 0;
    if (p.length < 8) return [(p[0] + p[p.length - 2]) / 2, (p[1] + p[p.length - 1]) / 2];
    const c = [(1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t * t, t ** 3];
    return [0, 1].map((d) => c[0] * p[i + d] + c[1] * p[i + 2 + d] + c[2] * p[i + 4 + d] + c[3] * p[i + 6 + d]);
  }

  function showView(v) {
    if (v === view) return;
    view = v;
    vp.textContent = '';
    itemOf.clear();
    const V = D.views[v], here = scopePath(V.scope);
    for (const [sc, x, y, w, hgt] of V.clusters || []) {
      const g = s('g', { class: 'cluster', 'data-scope': sc });
      g.append(s('rect', { x: x, y: y, width: w, height: hgt, rx: 6 }));
      g.append(s('text', { x: x + w / 2, y: y + 14, class: 'cluster-label' }, relative(scopePath(sc), here)));
      vp.append(g);
    }
    for (const [from, to, value, p] of V.edges) {
      if (p.length < 4) continue;
      let d = 'M' + p[0] + ',' + p[1] + 'C';
      for (let i = 2; i < p.length; i += 2) d += p[i] + ',' + p[i + 1] + ' ';
      const val = D.values[value];
      const g = s('g', { class: 'edge' });
      g.append(s('path', { d: d, 'marker-end': 'url(#arrow)' }));
      const m = midpoint(p);
      g.append(s('text', { x: m[0] + 4, y: m[1] + 3, class: 'edge-label' }, val[1]));
      vp.append(g);
    }
    for (const [kind, ref, x, y, w, hgt] of V.items) {
      const cx = x + w / 2, cy = y + hgt / 2;
      let g;
      if (kind === KIND_NODE) {
        const n = D.nodes[ref];
        g = s('g', { class: 'node p-' + (n.p || '-') + (n.op === 'Cast' ? ' cast' : ''), 'data-node': ref, id: 'node-' + ref });
        g.append(s('rect', { x: x, y: y, width: w, height: hgt, rx: 4 }));
        g.append(s('text', { x: cx, y: cy - 3, class: 'op' }, n.op));
        g.append(s('text', { x: cx, y: cy + 10, class: 'name' }, relative(nodeLabel(ref), here)));
        itemOf.set(ref, g);
      } else if (kind === KIND_SCOPE) {
        const sc = D.scopes[ref];
        g = s('g', { class: 'scope', 'data-scope': ref });
        g.append(s('rect', { x: x, y: y, width: w, height: hgt, rx: 6 }));
        g.append(s('text', { x: cx, y: cy - 6, class: 'op' }, relative(sc.path, here)));
        g.append(s('text', { x: cx, y: cy + 7, class: 'name' }, sc.total + ' nodes, open'));
        let at = x + 6;
        for (const p of PRECISIONS) {
          if (!sc.precisions[p]) continue;
          const bw = (w - 12) * sc.precisions[p] / sc.total;
          g.append(s('rect', { x: at, y: y + hgt - 9, width: bw, height: 4, class: 'bar p-' + p }));
          at += bw;
        }
      } else {
        const val = D.values[ref];
        g = s('g', { class: kind === KIND_INPUT ? 'stub in' : 'stub out' });
        g.append(s('ellipse', { cx: cx, cy: cy, rx: w / 2, ry: hgt / 2 }));
        g.append(s('text', { x: cx, y: cy + 4, class: 'name' }, val[0]));
      }
      vp.append(g);
    }
    crumbs.textContent = '';
    const chain = [];
    for (let sc = V.scope; sc >= 0; sc = D.scopes[sc].parent) chain.unshift(sc);
    chain.forEach((sc, i) => {
      const label = i === 0 ? 'model' : relative(scopePath(sc), scopePath(chain[i - 1]));
      crumbs.append(i ? ' / ' : '', h('a', { href: '#', onclick: (e) => { e.preventDefault(); openScope(sc); } }, label));
    });
    fit();
    if (selected >= 0 && itemOf.has(selected)) itemOf.get(selected).classList.add('selected');
  }

  function openScope(sc) {
    showView(D.scopes[sc].view);
    for (const g of vp.querySelectorAll('.cluster.hit')) g.classList.remove('hit');
    const c = vp.querySelector('.cluster[data-scope="' + sc + '"]');
    if (c) c.classList.add('hit');
  }

  // ---- the node panel ----
  function valueRow(v) {
    if (v < 0) return h('tr', {}, h('td', {}, '(absent)'), h('td'), h('td'));
    const [name, type, kind] = D.values[v];
    return h('tr', {}, h('td', { class: 'mono' }, name), h('td', { class: 'mono' }, type), h('td', {}, kind || ''));
  }
  function select(k) {
    const n = D.nodes[k];
    showView(n.view);
    if (selected >= 0 && itemOf.has(selected)) itemOf.get(selected).classList.remove('selected');
    selected = k;
    const g = itemOf.get(k);
    g.classList.add('selected');
    const r = g.querySelector('rect');
    center(+r.getAttribute('x') + +r.getAttribute('width') / 2, +r.getAttribute('y') + +r.getAttribute('height') / 2, 0.8);
    panel.textContent = '';
    panel.append(
      h('h2', {}, h('span', { class: 'badge p-' + (n.p || '-') }, n.p || 'no float data'), ' ', n.op),
      h('p', { class: 'mono', id: 'panel-name' }, nodeLabel(k)),
      h('p', {}, 'scope ', h('a', { href: '#', onclick: (e) => { e.preventDefault(); openScope(n.scope); } }, scopePath(n.scope))));
    panel.append(h('h3', {}, 'Why ' + (n.p || 'this precision')));
    if (n.why) panel.append(h('ol', { id: 'why' }, n.why.map((l) => h('li', {}, D.lines[l]))));
    else panel.append(h('p', { id: 'why-none' }, 'The model has no decision records: it was not written by amp-rewrite or amp-train --dtype.'));
    if (n.fields) panel.append(h('h3', {}, 'Decision record'), h('table', { id: 'fields' }, n.fields.map(([f, v]) => h('tr', {}, h('th', {}, f), h('td', { class: 'mono' }, v)))));
    panel.append(h('h3', {}, 'Inputs'), h('table', { class: 'io' }, n.in.map(valueRow)));
    panel.append(h('h3', {}, 'Outputs'), h('table', { class: 'io' }, n.out.map(valueRow)));
    if (n.attrs) panel.append(h('h3', {}, 'Attributes'), h('table', {}, n.attrs.map(([a, v]) => h('tr', {}, h('th', {}, a), h('td', { class: 'mono' }, v)))));
    return panel;
  }

  // ---- search ----
  function find(q) {
    q = q.trim().toLowerCase();
    if (!q) return [];
    // Nodes of that very op first, then names and ops that contain the text.
    const exact = [], partial = [];
    D.nodes.forEach((n, k) => {
      const op = n.op.toLowerCase();
      if (op === q) exact.push(k);
      else if (nodeLabel(k).toLowerCase().includes(q) || op.includes(q)) partial.push(k);
    });
    return exact.concat(partial);
  }
  function showResults() {
    const hits = find(search.value);
    results.textContent = '';
    results.hidden = hits.length === 0 && !search.value.trim();
    if (!search.value.trim()) return;
    results.append(h('li', { class: 'count' }, hits.length + ' node' + (hits.length === 1 ? '' : 's')));
    for (const k of hits.slice(0, 200))
      results.append(h('li', { 'data-node': k, onclick: () => { select(k); results.hidden = true; } },
        h('b', {}, D.nodes[k].op), ' ', nodeLabel(k)));
  }
  search.addEventListener('input', showResults);
  search.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { const hits = find(search.value); if (hits.length) { select(hits[0]); results.hidden = true; } }
    if (e.key === 'Escape') results.hidden = true;
  });

  // ---- summary and scopes ----
  function nodeLink(k) { return h('a', { href: '#', onclick: (e) => { e.preventDefault(); select(k); } }, nodeLabel(k)); }
  function summaryPanel() {
    const S = D.summary, rows = [];
    const row = (k, ...v) => rows.push(h('tr', {}, h('th', {}, k), h('td', {}, ...v)));
    row('file', S.file);
    row('producer', S.producer);
    row('graph', (D.training ? 'training step, ' : '') + S.nodes + ' nodes, ' + S.casts + ' Cast');
    if (S.rewrite) row('rewrite', S.rewrite);
    const total = Object.values(S.precisions).reduce((a, b) => a + b, 0);
    const hist = h('table', { class: 'hist' });
    for (const p of PRECISIONS) {
      if (!S.precisions[p]) continue;
      hist.append(h('tr', {}, h('th', {}, p === '-' ? 'no float' : p), h('td', {}, S.precisions[p]),
        h('td', { class: 'barcell' }, h('span', { class: 'hbar p-' + p, style: 'width:' + (100 * S.precisions[p] / total).toFixed(1) + '%' }))));
    }
    const parts = [h('table', {}, rows), h('h3', {}, 'Nodes per precision'), hist];
    if (Object.keys(S.decisions).length)
      parts.push(h('h3', {}, 'Decisions'), h('table', {}, Object.entries(S.decisions).map(([r, n]) => h('tr', {}, h('th', {}, r), h('td', {}, n)))));
    const casts = [h('tr', {}, h('th', {}, 'Cast nodes'), h('td', {}, S.casts))];
    if (S.rewrite_casts) {
      const c = S.rewrite_casts;
      casts.push(h('tr', {}, h('th', {}, 'inserted'), h('td', {}, c.inserted)), h('tr', {}, h('th', {}, 'retargeted'), h('td', {}, c.retargeted)),
        h('tr', {}, h('th', {}, 'removed'), h('td', {}, c.removed)), h('tr', {}, h('th', {}, 'before → after'), h('td', {}, c.before + ' → ' + c.after)));
    }
    parts.push(h('h3', {}, 'Casts'), h('table', {}, casts));
    parts.push(h('h3', {}, 'Parameters'), h('table', {}, Object.entries(S.parameters).map(([d, cb]) =>
      h('tr', {}, h('th', {}, d), h('td', {}, cb.count.toLocaleString('en') + ' (' + bytes(cb.bytes) + ')')))));
    const a = S.activation_bytes;
    const act = [h('tr', {}, h('th', {}, 'fp32'), h('td', {}, bytes(a.fp32))), h('tr', {}, h('th', {}, 'mixed (as typed)'), h('td', {}, bytes(a.as_typed)))];
    if (S.rewrite_activation_bytes) act.push(h('tr', {}, h('th', {}, 'input model'), h('td', {}, bytes(S.rewrite_activation_bytes.before))));
    parts.push(h('h3', {}, 'Activation memory (estimate)'), h('table', {}, act),
      h('p', { class: 'hint' }, 'Node outputs that depend on the inputs, without reuse; each symbolic dim counted as 1.'));
    const tc = S.tensor_core_alignment;
    parts.push(h('h3', {}, 'Tensor-core alignment'), tc.length
      ? h('ul', { id: 'alignment' }, tc.map(([node, fix]) => h('li', {}, h('span', { class: 'mono' }, node), ': ', fix)))
      : h('p', {}, S.has_records ? 'every low-precision product has dimensions that are multiples of 8' : 'no decision records'));
    if (S.warnings && S.warnings.length) parts.push(h('h3', {}, 'Warnings'), h('ul', {}, S.warnings.map((w) => h('li', {}, w))));
    if (S.training) {
      const t = S.training;
      parts.push(h('h3', {}, 'Training step'), h('table', {},
        h('tr', {}, h('th', {}, 'loss'), h('td', { class: 'mono' }, t.loss)),
        h('tr', {}, h('th', {}, 'loss scale'), h('td', { class: 'mono' }, t.loss_scale || 'none')),
        h('tr', {}, h('th', {}, 'inf check'), h('td', { class: 'mono' }, t.all_finite || 'none'))));
      if (t.loss_scale_nodes.length) parts.push(h('details', { id: 'loss-scale-nodes' }, h('summary', {}, t.loss_scale_nodes.length + ' nodes read the loss scale'), h('ul', {}, t.loss_scale_nodes.map((k) => h('li', {}, nodeLink(k))))));
      if (t.inf_check_nodes.length) parts.push(h('details', { id: 'inf-check-nodes' }, h('summary', {}, t.inf_check_nodes.length + ' inf-check nodes'), h('ul', {}, t.inf_check_nodes.map((k) => h('li', {}, nodeLink(k))))));
    }
    return h('details', { id: 'summary', open: '' }, h('summary', {}, 'Summary'), parts);
  }
  function scopeTree() {
    const kids = D.scopes.map(() => []);
    D.scopes.forEach((sc, i) => { if (sc.parent >= 0) kids[sc.parent].push(i); });
    function branch(i, depth) {
      const sc = D.scopes[i];
      const label = h('span', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); openScope(i); } },
        i ? relative(sc.path, D.scopes[sc.parent].path) : 'model'), ' ' + sc.total + ' ', precisionBar(sc.precisions, sc.total));
      if (!kids[i].length) return h('div', { class: 'leaf' }, label);
      return h('details', depth < 1 ? { open: '' } : {}, h('summary', {}, label), kids[i].map((c) => branch(c, depth + 1)));
    }
    return h('details', { id: 'scopes', open: '' }, h('summary', {}, 'Scopes'), branch(0, 0));
  }

  // ---- pan and zoom ----
  let drag = null;
  svg.addEventListener('mousedown', (e) => { drag = { x: e.clientX - T.x, y: e.clientY - T.y, moved: false }; });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    drag.moved = true;
    T.x = e.clientX - drag.x;
    T.y = e.clientY - drag.y;
    apply();
  });
  window.addEventListener('mouseup', () => { setTimeout(() => { drag = null; }, 0); });
  svg.addEventListener('wheel', (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect(), f = Math.exp(-e.deltaY * 0.0015);
    const px = e.clientX - r.left, py = e.clientY - r.top;
    T.x = px - (px - T.x) * f;
    T.y = py - (py - T.y) * f;
    T.k *= f;
    apply();
  }, { passive: false });
  svg.addEventListener('click', (e) => {
    if (drag && drag.moved) return;
    const n = e.target.closest('[data-node]');
    if (n) { select(+n.getAttribute('data-node')); return; }
    const sc = e.target.closest('.scope[data-scope]');
    if (sc) openScope(+sc.getAttribute('data-scope'));
  });
  window.addEventListener('resize', () => fit());

  showView(0);
  window.ampPage = { data: D, find: find, select: select, openScope: openScope, view: () => view, fit: fit };
})();
