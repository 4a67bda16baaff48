// The Runs and Report pages (issue 33, a tracker's runs table and report) in
// a real browser: Debian's Chromium driven by playwright-core against
// `kestrel serve --public-read` on an empty temporary home. GET /api/runs and
// the runs' metrics and job documents are the page's own mock (page.route) in
// the shapes docs/server.md publishes (tests/server/api_runs_test.cc checks
// the real route's); the static files are the real server's. Checked:
// columns chosen and sorted (row order), a pin kept at the top across a
// reload, the view in the URL, grouping by a config key (count, mean, best),
// the ticked runs overlaid on one job page, the report's chosen panels,
// summary and config tables, and its "Save as HTML" file opened from file://
// with no network request showing the charts and tables; axe-core on both
// pages; last, the page on the real route (no mock): two jobs submitted
// through the CLI listed with their config values. Screenshots go to
// KESTREL_WEB_ARTIFACTS (runs-page-*.png).
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/runs_page.test.mjs
// Exits 77 (ctest: skipped) without chromium or web/node_modules. ~10 s.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { CLI, DIST, MODULES, ARTIFACTS, CHROMIUM, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const chromium = chromiumOrSkip()

const WAIT = 15000
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-runs-'))
const home = path.join(tmp, 'home')
let server = null
let base = ''
let browser = null
let context = null
let page = null
const jsErrors = []

function startServer() {
  return startKestrelServe({ home, args: ['--port', '0', '--public-read', '--web-dir', DIST], wait: WAIT })
}

const json = (body, status = 200) => ({ status, contentType: 'application/json', body: JSON.stringify(body) })
const byTest = (id) => page.locator(`[data-testid="${id}"]`)
async function waitFor(fn, what) {
  let last
  for (const until = Date.now() + WAIT; Date.now() < until; await page.waitForTimeout(100)) {
    last = await fn().catch((e) => e)
    if (last === true) return
  }
  assert.fail(`${what}: ${last}`)
}
const shot = (name, p = page) => p.screenshot({ path: path.join(ARTIFACTS, `runs-page-${name}.png`), fullPage: true })

// Six training runs: lr0 0.01 or 0.02, mosaic 1 or 0, model n or s; each
// with epoch series whose best mAP50-95 is `best` and a loss falling to `loss`.
const EPOCHS = 5
const MAP = 'metrics/mAP50-95(B)'
const SPECS = [
  { id: 11, lr0: 0.01, mosaic: 1, model: 'n', best: 0.42, loss: 1.1, state: 'succeeded' },
  { id: 12, lr0: 0.02, mosaic: 1, model: 'n', best: 0.55, loss: 0.9, state: 'succeeded' },
  { id: 13, lr0: 0.01, mosaic: 0, model: 's', best: 0.31, loss: 1.4, state: 'succeeded' },
  { id: 14, lr0: 0.02, mosaic: 0, model: 's', best: 0.6, loss: 0.8, state: 'succeeded' },
  { id: 15, lr0: 0.01, mosaic: 1, model: 's', best: 0.48, loss: 1.0, state: 'failed_permanent' },
  { id: 16, lr0: 0.02, mosaic: 1, model: 'n', best: 0.2, loss: 2.0, state: 'running' },
]
function seriesOf(sp) {
  const ramp = (top) => Array.from({ length: EPOCHS }, (_, i) => [i + 1, (top * (i + 1)) / EPOCHS])
  const fall = (bottom) => Array.from({ length: EPOCHS }, (_, i) => [i + 1, bottom * (EPOCHS / (i + 1))])
  return {
    [MAP]: { x: 'epoch', data: ramp(sp.best) },
    'metrics/mAP50(B)': { x: 'epoch', data: ramp(Math.min(1, sp.best * 1.5)) },
    'train/box_loss': { x: 'epoch', data: fall(sp.loss) },
    'val/box_loss': { x: 'epoch', data: fall(sp.loss * 1.1) },
    'lr/pg0': { x: 'epoch', data: Array.from({ length: EPOCHS }, (_, i) => [i + 1, sp.lr0 / (i + 1)]) },
  }
}
function summaryOf(data, axis) {
  let min = data[0]
  let max = data[0]
  for (const p of data) {
    if (p[1] < min[1]) min = p
    if (p[1] > max[1]) max = p
  }
  const last = data[data.length - 1]
  return { axis, count: data.length, last: last[1], last_x: last[0], min: min[1], min_x: min[0], max: max[1], max_x: max[0] }
}
const CONFIG = (sp) => ({ data: 'shapes@v1', model: sp.model, epochs: EPOCHS, imgsz: 64, lr0: sp.lr0, mosaic: sp.mosaic, seed: 0 })
function runDoc(sp, keys, metrics) {
  const cfg = CONFIG(sp)
  const series = seriesOf(sp)
  const config = keys ? Object.fromEntries(keys.map((k) => [k, k in cfg ? cfg[k] : null])) : cfg
  const names = metrics || Object.keys(series)
  const m = Object.fromEntries(names.filter((n) => series[n]).map((n) => [n, summaryOf(series[n].data, series[n].x)]))
  return {
    id: sp.id, kind: 'train', state: sp.state, name: `shapes v1 · ${sp.model} · lr ${sp.lr0}`, tags: sp.id === 12 ? ['keep'] : [], note: '',
    priority: 'normal', attempt: 1, created_ms: 1_700_000_000_000 + sp.id * 60_000, finished_ms: sp.state === 'running' ? 0 : 1_700_000_000_000 + sp.id * 60_000 + sp.id * 1000,
    dataset: 'shapes', version: 'v1', duration_s: sp.state === 'running' ? null : sp.id, result: null, config, metrics: m,
  }
}
const runsRequests = []
function runsRoute(route) {
  const u = new URL(route.request().url())
  runsRequests.push(u.search)
  const list = (k) => (u.searchParams.has(k) ? u.searchParams.get(k).split(',').filter(Boolean) : null)
  const ids = list('ids')
  const chosen = ids ? ids.map(Number).map((id) => SPECS.find((s) => s.id === id)).filter(Boolean) : [...SPECS].reverse()
  const runs = chosen.map((sp) => runDoc(sp, list('keys'), list('metrics')))
  return route.fulfill(json({
    ok: true, runs, total: runs.length, next_cursor: null, sort: 'created', order: 'desc',
    keys: Object.keys(CONFIG(SPECS[0])).sort(), series: Object.keys(seriesOf(SPECS[0])).sort(),
  }))
}
function metricsRoute(route) {
  const id = Number(new URL(route.request().url()).pathname.split('/')[3])
  const sp = SPECS.find((s) => s.id === id)
  const series = seriesOf(sp)
  const names = Object.entries(series).map(([name, s]) => ({ name, x: s.x }))
  const out = Object.entries(series).map(([name, s]) => ({ name, x: s.x, points: s.data.length, downsampled: false, data: s.data }))
  return route.fulfill(json({ ok: true, job_id: id, width: 600, from: null, to: null, names, series: out, progress: null, last_event_id: 5, event_count: 5, events: [] }))
}
function jobRoute(route) {
  const id = Number(new URL(route.request().url()).pathname.split('/').pop())
  const sp = SPECS.find((s) => s.id === id)
  if (!sp) return route.fulfill(json({ ok: false, error: { message: 'no job' } }, 404))
  const d = runDoc(sp, null, null)
  return route.fulfill(json({
    job: { ...d, max_retries: 3, retries_used: 0, infra_retries_used: 0, last_reason: '', updated_ms: d.created_ms, config: CONFIG(sp), spec: {} },
    attempts: [], dataset: { name: 'shapes', version: 'v1' }, model: null,
  }))
}

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  const s = await startServer()
  server = s.proc
  base = s.url
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true })
  page = await context.newPage()
  page.on('pageerror', (e) => jsErrors.push(String(e)))
  await page.route('**/api/runs?*', runsRoute)
  await page.route(/\/api\/jobs\/1[1-6]\/metrics\?/, metricsRoute)
  await page.route(/\/api\/jobs\/1[1-6]$/, jobRoute)
  await page.route(/\/api\/jobs\/1[1-6]\/events$/, (route) => route.fulfill({ status: 200, contentType: 'text/event-stream', body: 'retry: 60000\n\n' }))
  await page.route('**/api/jobs?*', (route) => route.fulfill(json({ ok: true, jobs: SPECS.map((sp) => ({ ...runDoc(sp, null, null), config: CONFIG(sp) })), total: SPECS.length })))
})

after(async () => {
  if (browser) await browser.close()
  if (server) server.kill('SIGTERM')
  fs.rmSync(tmp, { recursive: true, force: true })
})

// The run ids of the table's rows, top to bottom.
const rowIds = () => page.$$eval('[data-testid="runs-table"] tbody tr[data-testid^="run-row-"]', (rows) => rows.map((r) => Number(r.dataset.testid.slice(8))))
const cellTexts = (col) => page.$$eval(`[data-testid="runs-table"] tbody tr[data-testid^="run-row-"] td[data-col="${col}"]`, (tds) => tds.map((t) => t.textContent.trim()))
const byBest = (desc) => [...SPECS].sort((a, b) => (desc ? b.best - a.best : a.best - b.best)).map((s) => s.id)

test('the Runs page: columns chosen and sorted, a pin kept across a reload, the view in the URL', async () => {
  await page.goto(`${base}/#/runs`)
  await page.evaluate(() => localStorage.clear())
  await page.reload()
  await byTest('run-row-11').waitFor({ timeout: WAIT })
  assert.equal(await byTest('nav-runs').getAttribute('aria-current'), 'page')
  // The newest first (the server's order), the default columns.
  assert.deepEqual(await rowIds(), [16, 15, 14, 13, 12, 11])
  assert.deepEqual(await cellTexts(`best:${MAP}`), ['0.2', '0.48', '0.6', '0.31', '0.55', '0.42'])
  assert.deepEqual(await cellTexts('last:train/box_loss'), ['2', '1', '0.8', '1.4', '0.9', '1.1'])
  // The request asks only for the columns' keys and series.
  assert.match(runsRequests.at(-1), /keys=model%2Cepochs%2Clr0/)
  // A config key chosen as a column.
  await byTest('column-picker').click()
  await page.locator('[data-testid="column-option-cfg:mosaic"]').click()
  await page.keyboard.press('Escape')
  await page.locator('[data-testid="col-cfg:mosaic"]').waitFor({ timeout: WAIT })
  await waitFor(async () => JSON.stringify(await cellTexts('cfg:mosaic')) === JSON.stringify(['1', '1', '0', '0', '1', '1']), 'the mosaic column filled')
  assert.match(runsRequests.at(-1), /mosaic/)
  // Sorted by best mAP50-95: best first, then ascending.
  await page.locator(`[data-testid="sort-best:${MAP}"]`).click()
  assert.deepEqual(await rowIds(), byBest(true))
  assert.equal(await page.locator(`[data-testid="col-best:${MAP}"]`).getAttribute('aria-sort'), 'descending')
  await page.locator(`[data-testid="sort-best:${MAP}"]`).click()
  assert.deepEqual(await rowIds(), byBest(false))
  // By a loss (lower is better: ascending first).
  await page.locator('[data-testid="sort-last:train/box_loss"]').click()
  assert.deepEqual(await rowIds(), [14, 12, 15, 11, 13, 16])
  await page.locator(`[data-testid="sort-best:${MAP}"]`).click()
  assert.deepEqual(await rowIds(), byBest(true))
  // Pin the worst run: it goes to the top; the sort holds below it.
  await byTest('pin-16').click()
  assert.deepEqual(await rowIds(), [16, ...byBest(true).filter((id) => id !== 16)])
  assert.equal(await byTest('pin-16').getAttribute('aria-pressed'), 'true')
  await shot('table')
  // The view is in the URL: a reload (and a shared link) shows it again.
  const url = page.url()
  assert.match(decodeURIComponent(url), /cols=.*cfg:mosaic/)
  assert.match(decodeURIComponent(url), /sort=best:metrics\/mAP50-95\(B\):desc/)
  await page.reload()
  await byTest('run-row-11').waitFor({ timeout: WAIT })
  await page.locator('[data-testid="col-cfg:mosaic"]').waitFor({ timeout: WAIT })
  assert.deepEqual(await rowIds(), [16, ...byBest(true).filter((id) => id !== 16)], 'pin and sort after a reload')
  // Local storage alone brings the view back too (no query in the URL).
  await page.goto(`${base}/#/home`)
  // Home drawn first: two hash changes in one tick would leave the Runs page mounted.
  await byTest('home-running-count').waitFor({ timeout: WAIT })
  await page.goto(`${base}/#/runs`)
  await byTest('run-row-11').waitFor({ timeout: WAIT })
  await page.locator('[data-testid="col-cfg:mosaic"]').waitFor({ timeout: WAIT })
  assert.deepEqual(await rowIds(), [16, ...byBest(true).filter((id) => id !== 16)], 'the stored view')
  await byTest('pin-16').click()
  assert.deepEqual(await rowIds(), byBest(true))
})

test('the Runs page: grouping by a config key with count, mean and best', async () => {
  await byTest('group-by').click()
  await byTest('group-option-lr0').click()
  await byTest('group-0').waitFor({ timeout: WAIT })
  // Groups in the order of their best row (sorted by best mAP50-95: 14 has lr0 0.02).
  const groups = await page.$$eval('[data-testid^="group-"][data-group]', (els) => els.map((e) => e.dataset.group))
  assert.deepEqual(groups, ['0.02', '0.01'])
  assert.equal(await byTest('group-count-0').innerText(), '(3 runs)')
  assert.equal(await byTest('group-count-1').innerText(), '(3 runs)')
  const agg = (gi, col) => page.locator(`[data-testid="group-${gi}"] tr.group-row td[data-col="${col}"]`).innerText()
  const mean = (lr, f) => SPECS.filter((s) => s.lr0 === lr).reduce((a, s) => a + f(s), 0) / 3
  const sig = (v) => Number(v.toPrecision(4)).toString()
  assert.equal(await agg(0, `best:${MAP}`), `mean ${sig(mean(0.02, (s) => s.best))} · best 0.6`)
  assert.equal(await agg(1, `best:${MAP}`), `mean ${sig(mean(0.01, (s) => s.best))} · best 0.48`)
  assert.equal(await agg(0, 'last:train/box_loss'), `mean ${sig(mean(0.02, (s) => s.loss))} · best 0.8`)
  assert.equal(await agg(0, 'cfg:mosaic'), 'mean 0.6667')
  // Collapsed until opened; then its rows in the sort's order.
  assert.equal(await rowIds().then((r) => r.length), 0)
  await byTest('group-toggle-0').click()
  assert.equal(await byTest('group-toggle-0').getAttribute('aria-expanded'), 'true')
  assert.deepEqual(await rowIds(), [14, 12, 16])
  assert.match(decodeURIComponent(page.url()), /group=lr0/)
  await shot('grouped')
  await byTest('group-by').click()
  await byTest('group-option-none').click()
  await byTest('run-row-11').waitFor({ timeout: WAIT })
})

test('ticked runs overlaid on one job page', async () => {
  await byTest('select-14').check()
  await byTest('select-12').check()
  assert.equal(await byTest('runs-overlay').innerText(), 'Overlay curves (2)')
  await byTest('runs-overlay').click()
  await page.waitForURL(/#\/jobs\/14\?overlay=12$/, { timeout: WAIT })
  await byTest('map-chart').locator('canvas').first().waitFor({ timeout: WAIT })
  await waitFor(async () => {
    const ids = await page.evaluate(() => document.querySelector('[data-testid="map-chart"]').echart.getOption().series.map((s) => s.id.split(':')[0]))
    return (new Set(ids).size === 2 && ids.includes('14') && ids.includes('12')) || JSON.stringify(ids)
  }, 'both runs on the mAP chart')
  await shot('overlay')
})

test('the report: chosen panels, summary and config tables, saved as one HTML file that opens offline', async () => {
  await page.goto(`${base}/#/runs`)
  await byTest('run-row-11').waitFor({ timeout: WAIT })
  for (const id of [14, 12, 13]) await byTest(`select-${id}`).check()
  await byTest('runs-report').click()
  await page.waitForURL(/#\/report\?runs=14%2C12%2C13$/, { timeout: WAIT })
  assert.equal(await byTest('nav-runs').getAttribute('aria-current'), 'page')
  await byTest('summary-row-13').waitFor({ timeout: WAIT })
  // The default panels (validation metrics, train and validation losses), each with the three runs.
  for (const key of ['map', 'loss', 'val']) await byTest(`${key}-chart`).locator('canvas').first().waitFor({ timeout: WAIT })
  assert.equal(await byTest('lr-chart').count(), 0, 'the learning-rate panel is not chosen')
  await waitFor(async () => {
    const ids = await page.evaluate(() => document.querySelector('[data-testid="map-chart"]').echart.getOption().series.map((s) => s.id.split(':')[0]))
    return new Set(ids).size === 3 || JSON.stringify(ids)
  }, 'three runs on the mAP chart')
  // Choose the learning-rate panel too; drop the validation losses.
  await byTest('report-panels').click()
  await byTest('panel-option-lr').click()
  await byTest('panel-option-val').click()
  await page.keyboard.press('Escape')
  await byTest('lr-chart').locator('canvas').first().waitFor({ timeout: WAIT })
  await waitFor(async () => (await byTest('val-chart').count()) === 0, 'the validation-loss panel gone')
  // Summary: the best run per column marked (14: best mAP50-95 and lowest loss).
  const best = await page.$$eval('[data-testid="report-summary"] td.best', (tds) => tds.map((t) => t.closest('tr').dataset.testid))
  assert.ok(best.length >= 2 && best.every((t) => t === 'summary-row-14'), JSON.stringify(best))
  // Config: lr0, mosaic and model differ across 14, 12, 13; the rest not.
  assert.equal(await byTest('report-differing').innerText(), '3 of 7 keys differ')
  for (const k of ['lr0', 'mosaic', 'model']) assert.match(await byTest(`config-row-${k}`).getAttribute('class'), /differs/)
  assert.doesNotMatch((await byTest('config-row-imgsz').getAttribute('class')) || '', /differs/)
  await byTest('report-only-differing').click()
  assert.equal(await page.locator('[data-testid="report-config"] tbody tr').count(), 3)
  await byTest('report-only-differing').click()
  // Title and note, kept in the URL.
  await byTest('report-title').fill('lr sweep <n vs s>')
  await byTest('report-note').fill('lr0 0.02 wins & mosaic helps.\nSecond line.')
  const hashQuery = () => new URLSearchParams(page.url().split('?')[1] || '')
  await waitFor(async () => (hashQuery().get('title') === 'lr sweep <n vs s>' && hashQuery().get('panels') === 'map,loss,lr') || page.url(), 'the title and panels in the URL')
  await shot('report')

  // Save as HTML: one file.
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), byTest('report-save').click()])
  assert.equal(download.suggestedFilename(), 'lr-sweep-n-vs-s.html')
  const file = path.join(tmp, download.suggestedFilename())
  await download.saveAs(file)
  const html = fs.readFileSync(file, 'utf8')
  assert.ok(!/<script|<link|src="http|href="http|url\(/i.test(html), 'nothing in the file loads or runs')
  // Opened from file:// in a fresh browser context that cannot reach any network.
  const offline = await browser.newContext({ viewport: { width: 1280, height: 800 }, offline: true })
  const view = await offline.newPage()
  const requests = []
  view.on('request', (r) => requests.push(r.url()))
  const fileUrl = pathToFileURL(file).href
  await view.goto(fileUrl)
  assert.equal(await view.locator('#report-title').innerText(), 'lr sweep <n vs s>')
  assert.equal(await view.locator('#report-note').innerText(), 'lr0 0.02 wins & mosaic helps.\nSecond line.')
  const imgs = await view.$$eval('#report-charts img', (els) => els.map((i) => ({ alt: i.alt, w: i.naturalWidth, h: i.naturalHeight, data: i.src.startsWith('data:image/png;base64,') })))
  assert.equal(imgs.length, 3, JSON.stringify(imgs.map((i) => i.alt)))
  for (const i of imgs) assert.ok(i.data && i.w > 300 && i.h > 100, `chart "${i.alt}" drawn (${i.w}x${i.h})`)
  assert.deepEqual(imgs.map((i) => i.alt), ['Validation metrics (mAP, precision, recall)', 'Train losses per epoch', 'Learning rate per parameter group'])
  assert.equal(await view.locator('#report-summary tbody tr').count(), 3)
  assert.equal(await view.locator('#report-summary td.best').first().evaluate((td) => td.closest('tr').querySelector('th').textContent.startsWith('#14')), true)
  assert.equal(await view.locator('#report-config tbody tr.differs').count(), 3)
  assert.equal(await view.locator('#report-config tbody tr').count(), 7)
  assert.deepEqual(requests.filter((u) => u !== fileUrl && !u.startsWith('data:')), [], 'no request but the file itself')
  await shot('report-offline', view)
  await offline.close()
})

// axe-core on both pages (as ui.test.mjs does for the others): no critical violation.
test('accessibility: axe-core finds no critical violation on the Runs and Report pages', async () => {
  const axeSource = fs.readFileSync(path.join(MODULES, 'axe-core', 'axe.min.js'), 'utf8')
  const failures = []
  for (const [where, ready] of [['runs', 'run-row-11'], ['runs?group=lr0', 'group-0'], ['report?runs=14,12', 'summary-row-12']]) {
    await page.goto(`${base}/#/${where}`)
    await byTest(ready).first().waitFor({ timeout: WAIT })
    await page.evaluate(axeSource)
    const found = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] })
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')} ${n.html.slice(0, 160)}`) }))
    })
    for (const v of found) {
      if (v.impact === 'critical') failures.push(`#/${where}: ${v.id} at ${v.nodes.join(', ')}`)
      else console.log(`axe #/${where}: ${v.impact} ${v.id} at ${v.nodes.join(', ')}`)
    }
  }
  assert.deepEqual(failures, [])
})

// The same page on the real route (no mock): two jobs submitted through the
// CLI with their own lr0 are rows with the values the server's configs hold.
test('the Runs page on the real GET /api/runs: submitted jobs with their config values', async () => {
  const kestrel = (...args) => execFileSync(CLI, ['--home', home, ...args], { encoding: 'utf8' })
  kestrel('dataset', 'synth', path.join(tmp, 'shapes'), '--images', '8', '--classes', '2', '--imgsz', '64')
  kestrel('dataset', 'import', path.join(tmp, 'shapes'), '--name', 'shapes')
  const ids = ['0.03', '0.04'].map((lr) => JSON.parse(kestrel('--json', 'submit', 'data=shapes', 'model=n', 'epochs=1', 'imgsz=64', `lr0=${lr}`)).job_id)
  await page.unroute('**/api/runs?*')
  await page.goto(`${base}/#/home`)
  await byTest('home-running-count').waitFor({ timeout: WAIT })
  await page.goto(`${base}/#/runs?cols=${encodeURIComponent('cfg:lr0|cfg:imgsz|state')}&sort=${encodeURIComponent('cfg:lr0:desc')}&group=`)
  await byTest(`run-row-${ids[0]}`).waitFor({ timeout: WAIT })
  assert.deepEqual(await rowIds(), [ids[1], ids[0]])
  assert.deepEqual(await cellTexts('cfg:lr0'), ['0.04', '0.03'])
  assert.deepEqual(await cellTexts('cfg:imgsz'), ['64', '64'])
  assert.deepEqual(await cellTexts('state'), ['queued', 'queued'])
  assert.equal(await byTest('runs-count').innerText(), '2 of 2 training runs')
})

test('no JavaScript error on any page', () => {
  assert.deepEqual(jsErrors, [])
})
