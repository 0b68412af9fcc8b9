// Opens an amp-inspect/amp-rewrite --html page in Debian's headless Chromium with the network off
// and checks it as a person would use it, then node by node:
//   - the page loads from file:// with no request to anything else and no console error;
//   - a real click on a node of the first view opens its panel, whose reasons are the lines that
//     `amp-inspect MODEL --explain NODE` prints;
//   - typing an op into the search box lists every node of that op; clicking a result opens it;
//   - a screenshot;
//   - every node: the search finds it by its name, selecting it draws it (its <g> with its name as
//     text) and its panel's reasons are, line for line, what --explain prints for it.
//
//   node page_test.js --page P.html --model M.onnx --inspect BUILD/amp-inspect --screenshot S.png
//        [--search OP] [--expect-records yes|no]
'use strict';
const { chromium } = require('playwright-core');
const { execFileSync } = require('child_process');
const path = require('path');

function args() {
  const a = {};
  for (let i = 2; i < process.argv.length; i += 2) a[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  for (const k of ['page', 'model', 'inspect', 'screenshot'])
    if (!a[k]) throw new Error('page_test.js: --' + k + ' is required');
  return a;
}

// `amp-inspect MODEL --explain N1 --explain N2 ...`: one block of lines per node, blank-separated.
function explanations(inspect, model, labels) {
  const out = new Map();
  const chunk = 2000;  // keeps each command line well under the kernel's limit
  for (let i = 0; i < labels.length; i += chunk) {
    const part = labels.slice(i, i + chunk);
    const argv = [model];
    for (const l of part) argv.push('--explain', l);
    const text = execFileSync(inspect, argv, { maxBuffer: 1 << 30 }).toString();
    const blocks = text.replace(/\n$/, '').split('\n\n');
    if (blocks.length !== part.length) throw new Error('--explain gave ' + blocks.length + ' blocks for ' + part.length + ' nodes');
    part.forEach((l, j) => out.set(l, blocks[j].split('\n')));
  }
  return out;
}

function sameLines(a, b) { return a.length === b.length && a.every((x, i) => x === b[i]); }

(async () => {
  const a = args();
  const failures = [];
  const fail = (m) => { failures.push(m); };
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ offline: true, viewport: { width: 1400, height: 860 } });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') fail('console error: ' + m.text()); });
  page.on('pageerror', (e) => fail('page error: ' + e.message));
  page.on('request', (r) => { if (!/^(file|data):/.test(r.url())) fail('the page fetched ' + r.url()); });
  const started = Date.now();
  await page.goto('file://' + path.resolve(a.page));
  await page.waitForSelector('#graph .node, #graph .scope');
  console.log('loaded in ' + (Date.now() - started) + ' ms');

  const nodes = await page.evaluate(() => window.ampPage.data.nodes.map((n) => ({ label: n.name || n.ref, op: n.op, view: n.view, why: !!n.why })));
  const records = nodes.some((n) => n.why);
  if (a['expect-records'] && (a['expect-records'] === 'yes') !== records)
    fail('decision records: expected ' + a['expect-records'] + ', the page has ' + (records ? 'some' : 'none'));
  const expected = records ? explanations(a.inspect, a.model, nodes.map((n) => n.label)) : null;

  // A real click on a node drawn in the first view.
  const first = page.locator('#graph g.node').first();
  const clicked = +(await first.getAttribute('data-node'));
  await first.click();
  await page.waitForSelector('#panel-name');
  const shownName = await page.textContent('#panel-name');
  if (shownName !== nodes[clicked].label) fail('click: the panel shows ' + shownName + ', not ' + nodes[clicked].label);
  if (records) {
    const why = await page.$$eval('#why li', (li) => li.map((e) => e.textContent));
    if (!sameLines(why, expected.get(nodes[clicked].label)))
      fail('click: the reasons of ' + nodes[clicked].label + ' are\n  ' + why.join('\n  ') + '\n--explain prints\n  ' + expected.get(nodes[clicked].label).join('\n  '));
  } else if (!(await page.$('#why-none'))) {
    fail('click: a model without decision records does not say so');
  }

  // The search box, by op.
  const op = a.search || nodes[0].op;
  await page.fill('#search', op);
  const listed = await page.$$eval('#results li[data-node]', (li) => li.map((e) => +e.getAttribute('data-node')));
  const ofOp = nodes.map((n, k) => (n.op === op ? k : -1)).filter((k) => k >= 0);
  if (ofOp.length === 0) fail('search: no node is a ' + op);
  for (const k of ofOp.slice(0, 200)) if (!listed.includes(k)) fail('search "' + op + '" does not list ' + nodes[k].label);
  await page.click('#results li[data-node]');
  const picked = await page.textContent('#panel-name');
  if (picked !== nodes[listed[0]].label) fail('search: clicking the first result shows ' + picked);
  await page.screenshot({ path: a.screenshot });

  // Every node: found by name, drawn with its name as text, its reasons as --explain prints them.
  const order = nodes.map((n, k) => k).sort((x, y) => nodes[x].view - nodes[y].view || x - y);
  const seen = await page.evaluate((order) => {
    const P = window.ampPage, out = [];
    const byName = new Map();
    for (const k of order) {
      const n = P.data.nodes[k], label = n.name || n.ref;
      const found = P.find(label).includes(k);
      P.select(k);
      const g = document.getElementById('node-' + k);
      const drawn = !!g && g.getBoundingClientRect().width > 0;
      const text = g ? g.textContent : '';
      const tail = label.split('/').pop();
      const why = Array.from(document.querySelectorAll('#why li')).map((e) => e.textContent);
      out.push([k, found, drawn && text.includes(tail), document.getElementById('panel-name').textContent === label, why]);
    }
    return out;
  }, order);
  let checked = 0;
  for (const [k, found, drawn, named, why] of seen) {
    const label = nodes[k].label;
    if (!found) fail('search does not find ' + label);
    if (!drawn) fail(label + ' is not drawn with its name when selected');
    if (!named) fail('the panel of ' + label + ' does not name it');
    if (records && !sameLines(why, expected.get(label)))
      fail('the reasons of ' + label + ' are\n  ' + why.join('\n  ') + '\n--explain prints\n  ' + expected.get(label).join('\n  '));
    ++checked;
  }
  await browser.close();
  console.log(path.basename(a.page) + ': ' + checked + ' nodes checked' + (records ? ' against --explain' : ' (no decision records)') +
    ', ' + failures.length + ' failures, screenshot ' + a.screenshot);
  for (const f of failures.slice(0, 20)) console.log('FAIL ' + f);
  process.exit(failures.length ? 1 : 0);
})().catch((e) => { console.log('FAIL ' + (e.stack || e)); process.exit(1); });
