// Issue 33's findings 1, 2, 3, 5 and 6 in a real browser: Debian's Chromium
// driven by playwright-core against `kestrel serve --public-read` on an empty
// temporary home. The job, model and stats documents are the page's own
// mock (page.route) in the shapes docs/server.md publishes, so each page is
// checked on a run with every scalar, a model with plots and per-class rows,
// and a cancelled attempt, without training anything; job kinds, the
// export-job submission (its refusal is the server's own check) and the
// static files are the real server's. Screenshots go to KESTREL_WEB_ARTIFACTS.
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/workspace.test.mjs
// Exits 77 (ctest: skipped) without chromium or web/node_modules. ~10 s.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { CLI, DIST, ARTIFACTS, CHROMIUM, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const chromium = chromiumOrSkip()

const WAIT = 15000
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-workspace-'))
const home = path.join(tmp, 'home')
let server = null
let base = ''
let browser = null
let page = null
const jsErrors = []

function startServer() {
  return startKestrelServe({ home, args: ['--port', '0', '--public-read', '--web-dir', DIST], wait: WAIT })
}

// A w x h PNG of one colour (the stored plots' stand-ins).
function png(w, h, rgb) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    return c >>> 0
  })
  const crc = (buf) => {
    let c = 0xffffffff
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8)
    return (c ^ 0xffffffff) >>> 0
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4)
    len.writeUInt32BE(data.length)
    const td = Buffer.concat([Buffer.from(type), data])
    const c = Buffer.alloc(4)
    c.writeUInt32BE(crc(td))
    return Buffer.concat([len, td, c])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(w, 0)
  ihdr.writeUInt32BE(h, 4)
  ihdr[8] = 8
  ihdr[9] = 2
  const raw = Buffer.alloc((w * 3 + 1) * h)
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw.set(rgb, y * (w * 3 + 1) + 1 + x * 3)
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))])
}

const json = (body, status = 200) => ({ status, contentType: 'application/json', body: JSON.stringify(body) })
const byTest = (id) => page.locator(`[data-testid="${id}"]`)
const chartOption = (id) => page.evaluate((sel) => {
  const o = document.querySelector(sel).echart.getOption()
  const pairs = (d) => (ArrayBuffer.isView(d) ? Array.from({ length: d.length / 2 }, (_, i) => [d[2 * i], d[2 * i + 1]]) : d)
  return {
    legend: o.legend.map((l) => ({ type: l.type })),
    tooltip: o.tooltip.map((t) => ({ confine: t.confine, sample: typeof t.valueFormatter === 'function' ? t.valueFormatter(0.123456789) : null })),
    yAxis: o.yAxis.map((a) => ({ type: a.type })),
    xAxis: o.xAxis.map((a) => ({ name: a.name })),
    gridTop: o.grid[0].top,
    series: o.series.filter(Boolean).map((s) => ({ id: s.id, name: s.name, color: s.color, dash: s.lineStyle?.type, data: pairs(s.data) })),
  }
}, `[data-testid="${id}"]`)
async function waitFor(fn, what) {
  let last
  for (const until = Date.now() + WAIT; Date.now() < until; await page.waitForTimeout(100)) {
    last = await fn().catch((e) => e)
    if (last === true) return
  }
  assert.fail(`${what}: ${last}`)
}
const shot = (name) => page.screenshot({ path: path.join(ARTIFACTS, `workspace-${name}.png`), fullPage: true })

// A training job with every scalar the trainer logs (app/metric_events.h).
const EPOCHS = 6
const ITERS = 20 // per epoch
function runSeries(scale) {
  const series = {}
  const epoch = (name, f) => (series[name] = { x: 'epoch', data: Array.from({ length: EPOCHS }, (_, i) => [i + 1, f(i + 1)]) })
  epoch('train/box_loss', (e) => scale * (2 / e))
  epoch('train/cls_loss', (e) => scale * (3 / e))
  epoch('train/dfl_loss', (e) => scale * (1.5 / e))
  epoch('val/box_loss', (e) => scale * (2.2 / e))
  epoch('val/cls_loss', (e) => scale * (3.1 / e))
  epoch('val/dfl_loss', (e) => scale * (1.6 / e))
  epoch('metrics/precision(B)', (e) => 0.1 * e)
  epoch('metrics/recall(B)', (e) => 0.09 * e)
  epoch('metrics/mAP50(B)', (e) => 0.08 * e)
  epoch('metrics/mAP50-95(B)', (e) => 0.05 * e)
  epoch('lr/pg0', (e) => 0.01 / e)
  epoch('lr/pg1', (e) => 0.01 / e)
  epoch('lr/pg2', (e) => 0.09 / e)
  epoch('time', (e) => 12.5 * e)
  series['iter/box_loss'] = { x: 'step', data: Array.from({ length: EPOCHS * ITERS }, (_, i) => [i + 1, 1 + 0.3 * Math.sin(i / 3)]) }
  return series
}
function metricsRoute(jobId, series, progress) {
  return (route) => {
    const names = Object.entries(series).map(([name, s]) => ({ name, x: s.x }))
    const out = Object.entries(series).map(([name, s]) => ({ name, x: s.x, points: s.data.length, downsampled: false, data: s.data }))
    return route.fulfill(json({ ok: true, job_id: jobId, width: 600, from: null, to: null, names, series: out, progress, last_event_id: 10, event_count: 10, events: [] }))
  }
}
const CONFIG = { data: 'shapes@v1', model: 'n', epochs: EPOCHS, imgsz: 64, lr0: 0.01, mosaic: 1, pretrained: '/h/objects/ab/' + 'ab'.repeat(32) }
for (let i = 0; CONFIG && Object.keys(CONFIG).length < 62; i++) CONFIG[`key_${String(i).padStart(2, '0')}`] = i
const jobDoc = (id, state, attempts) => ({
  job: {
    id, kind: 'train', state, priority: 'normal', attempt: attempts.length || 1, max_retries: 3, retries_used: 0, infra_retries_used: 0,
    last_reason: state === 'cancelled' ? 'cancelled' : '', created_ms: Date.now() - 60000, updated_ms: Date.now(), config: CONFIG, spec: {}, tags: [], name: '', note: '',
  },
  attempts,
  links: { pretrained: { path: CONFIG.pretrained, model: { id: 'ab'.repeat(32), ref: 'base@v1' } } },
})
const runningAttempt = { attempt: 1, worker: 'w1', host: 'h', pid: 10, started_ms: Date.now() - 50000, ended_ms: 0, succeeded: false, stage: '', failure_class: 'none', reason: '', message: '' }
const cancelledAttempt = { ...runningAttempt, ended_ms: Date.now() - 1000, reason: 'cancelled', message: 'cancelled by the user', stage: '', failure_class: '' }
let cancelPosts = 0
let jobState = 'running'
const progressEvents = [86, 384, 147].map((eta, i) => ({
  id: 11 + i, job_id: 901, attempt: 1, kind: 'progress', created_ms: Date.now(),
  payload: { epoch: 4, epochs: EPOCHS, batch: 5 + i, batches: ITERS, iteration: 65 + i, iterations: EPOCHS * ITERS, it_per_s: 3, eta_s: eta },
}))

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  // A read-write token: the export dialog's POST is the real server's (reads need none).
  const token = JSON.parse(execFileSync(CLI, ['--home', home, '--json', 'token', 'create', '--name', 'web-workspace'], { encoding: 'utf8' })).token
  const s = await startServer()
  server = s.proc
  base = s.url
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  page = await browser.newPage({ viewport: { width: 1280, height: 800 }, acceptDownloads: true })
  page.on('pageerror', (e) => jsErrors.push(String(e)))
  await page.addInitScript((t) => localStorage.setItem('kestrel.token', t), token)
  const runA = runSeries(1)
  const runB = runSeries(1.3)
  await page.route(/\/api\/jobs\/(901|902)$/, (route) => {
    const id = Number(new URL(route.request().url()).pathname.split('/').pop())
    if (id === 902) return route.fulfill(json(jobDoc(902, 'succeeded', [])))
    return route.fulfill(json(jobDoc(901, jobState, jobState === 'cancelled' ? [cancelledAttempt] : [runningAttempt])))
  })
  await page.route('**/api/jobs/901/metrics?*', metricsRoute(901, runA, { epoch: 4, epochs: EPOCHS, iterations: EPOCHS * ITERS, eta_s: 80 }))
  await page.route('**/api/jobs/902/metrics?*', metricsRoute(902, runB, null))
  await page.route('**/api/jobs?*', (route) => route.fulfill(json({ ok: true, jobs: [jobDoc(902, 'succeeded', []).job], total: 1 })))
  await page.route('**/api/jobs/901/events', (route) => {
    const body = 'retry: 60000\n\n' + progressEvents.map((e) => `id: ${e.id}\nevent: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`).join('')
    return route.fulfill({ status: 200, contentType: 'text/event-stream', body })
  })
  await page.route('**/api/jobs/901/cancel', (route) => {
    cancelPosts++
    jobState = 'cancelled'
    return route.fulfill(json({ ok: true }))
  })
})

after(async () => {
  if (browser) await browser.close()
  if (server) server.kill('SIGTERM')
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('finding 2 and 5: every scalar charted by prefix, legends not paged, log and x-axis toggles, overlays by run colour', async () => {
  await page.goto(`${base}/#/jobs/901`)
  for (const key of ['map', 'loss', 'val', 'lr', 'iter', 'time']) await byTest(`${key}-chart`).locator('canvas').first().waitFor({ timeout: WAIT })
  const lr = await chartOption('lr-chart')
  assert.deepEqual(lr.series.map((s) => s.name).sort(), ['lr/pg0', 'lr/pg1', 'lr/pg2'])
  const val = await chartOption('val-chart')
  assert.equal(val.series.length, 3)
  for (const key of ['map', 'loss', 'val', 'lr', 'iter', 'time']) {
    const o = await chartOption(`${key}-chart`)
    assert.equal(o.legend[0].type, 'plain', `${key}: a legend that never pages`)
    assert.equal(o.tooltip[0].confine, true, `${key}: the tooltip stays inside its chart`)
    assert.equal(o.tooltip[0].sample, '0.1235', `${key}: 4 significant digits`)
  }
  await shot('job-charts')
  // Log scale, then wall time on the x axis (epoch e ends at 12.5 e s; a step between epoch ends in between).
  await byTest('log-scale').click()
  await waitFor(async () => (await chartOption('loss-chart')).yAxis[0].type === 'log', 'log y axis')
  await byTest('log-scale').click()
  await byTest('x-axis-mode').click()
  await byTest('x-axis-time').click()
  await waitFor(async () => {
    const o = await chartOption('loss-chart')
    return JSON.stringify(o.series[0].data.map(([x]) => x)) === JSON.stringify([12.5, 25, 37.5, 50, 62.5, 75]) || JSON.stringify(o.series[0].data)
  }, 'epochs at their wall seconds')
  const iterOnTime = await chartOption('iter-chart')
  assert.equal(iterOnTime.series[0].data[9][0], 12.5 * (10 / ITERS), 'step 10 halfway through epoch 1')
  await byTest('x-axis-mode').click()
  await byTest('x-axis-step').click()
  await waitFor(async () => (await chartOption('loss-chart')).series[0].data[0][0] === ITERS, 'epoch 1 at step 20')
  await byTest('x-axis-mode').click()
  await byTest('x-axis-auto').click()
  // Overlay job 902: a colour per run, a line style per metric, and still one legend page.
  await byTest('overlay-select').click()
  await byTest('overlay-option-902').click()
  await page.keyboard.press('Escape')
  await waitFor(async () => (await chartOption('loss-chart')).series.length === 6, 'the overlaid run adds 3 lines')
  const loss = await chartOption('loss-chart')
  const colourOf = (id) => new Set(loss.series.filter((s) => s.id.startsWith(`${id}:`)).map((s) => s.color))
  assert.equal(colourOf(901).size, 1, 'one colour for run 901')
  assert.equal(colourOf(902).size, 1, 'one colour for run 902')
  assert.notDeepEqual([...colourOf(901)], [...colourOf(902)])
  const dashOf = (name) => JSON.stringify(loss.series.filter((s) => s.name.endsWith(name)).map((s) => s.dash))
  assert.equal(new Set(['train/box_loss', 'train/cls_loss', 'train/dfl_loss'].map(dashOf)).size, 3, 'a line style per metric')
  assert.equal(loss.legend[0].type, 'plain')
  assert.ok(loss.gridTop >= 38, `the grid starts below a wrapped legend (top ${loss.gridTop})`)
  await byTest('map-chart').scrollIntoViewIfNeeded()
  await shot('job-overlay')
})

test('finding 5: the ETA is steadier than the trainer\'s (86 -> 384 -> 147 s)', async () => {
  await waitFor(async () => (await byTest('eta').count()) > 0, 'an ETA')
  await waitFor(async () => {
    const t = await byTest('eta').innerText()
    const m = /ETA (\d+) min (\d+) s|ETA (\d+) s/.exec(t)
    if (!m) return t
    const s = m[3] ? Number(m[3]) : Number(m[1]) * 60 + Number(m[2])
    return (s > 120 && s < 175) || `ETA ${s} s (${t})`
  }, 'the smoothed ETA between the swings')
})

test('finding 3: the whole effective config, pretrained as a link', async () => {
  await byTest('job-config').waitFor({ timeout: WAIT })
  assert.equal(await byTest('config-count').innerText(), '62 of 62 keys')
  assert.match(await byTest('config-lr0').innerText(), /lr0\s+0\.01/)
  assert.match(await byTest('config-mosaic').innerText(), /mosaic\s+1/)
  assert.equal(await byTest('config-link-pretrained').getAttribute('href'), '#/models/base%40v1')
  await byTest('config-filter').fill('lr0')
  assert.equal(await byTest('config-count').innerText(), '1 of 62 keys')
  await byTest('config-filter').fill('')
  await byTest('job-config').scrollIntoViewIfNeeded()
  await shot('job-config')
})

test('finding 6: cancel asks first; the attempt reads cancelled, not failed; availability "—" when none finished', async () => {
  await page.evaluate(() => window.scrollTo(0, 0))
  await byTest('job-cancel').click()
  await page.getByRole('dialog').waitFor({ timeout: WAIT })
  assert.equal(cancelPosts, 0, 'one click cancels nothing')
  await shot('cancel-confirm')
  await byTest('cancel-keep').click()
  assert.equal(cancelPosts, 0)
  await byTest('job-cancel').click()
  await byTest('cancel-confirm-yes').click()
  await waitFor(async () => cancelPosts === 1, 'the cancel POST after the confirmation')
  await waitFor(async () => (await byTest('attempt-outcome-1').count()) > 0 && (await byTest('attempt-outcome-1').innerText()) === 'cancelled', 'the attempt tagged cancelled')
  assert.match(await byTest('attempt-outcome-1').getAttribute('class'), /el-tag--info/)
  const text = await byTest('attempt-failure-1').innerText()
  assert.equal(text, 'cancelled by the user')
  assert.ok(!/\/ :/.test(text))
  assert.equal(await byTest('progress').count(), 0, 'no live progress on a cancelled job')
  await byTest('attempts-table').scrollIntoViewIfNeeded()
  await shot('cancelled-attempt')

  await page.route('**/api/stats', (route) => route.fulfill(json({
    jobs: 1, succeeded: 0, failed_permanent: 0, cancelled: 1, live: 0, finished: 0, availability: 0, attempts: 0, failed_attempts: 0, cancelled_attempts: 1,
    retries: 0, infra_retries: 0, failures_by_stage: {}, failures_by_class: {}, failures_by_reason: {}, mean_time_to_recovery_ms: 0,
    recovered_jobs: 0, mean_time_to_restart_ms: 0, restarted_attempts: 0, breaker: { open: false, reason: '' }, disk: {},
  })))
  await page.goto(`${base}/#/system`)
  await byTest('availability').waitFor({ timeout: WAIT })
  assert.equal(await byTest('availability').innerText(), '—')
  assert.equal(await byTest('cancelled-attempts').innerText(), '1 cancelled attempts')
  await shot('system')
  await page.unroute('**/api/stats')
})

test('finding 1: model page with plots, per-class table and CSV, integer best_epoch, parent link, Export', async () => {
  const plots = ['results.png', 'PR_curve.png', 'F1_curve.png', 'confusion_matrix_normalized.png', 'labels.jpg']
  const colours = { 'PR_curve.png': [200, 40, 40], 'F1_curve.png': [40, 160, 40], 'confusion_matrix_normalized.png': [40, 40, 200], 'results.png': [200, 200, 40], 'labels.jpg': [90, 90, 90] }
  const perClass = [
    { class_id: 0, name: 'circle', images: 4, instances: 6, precision: 0.9, recall: 0.8, map50: 0.85, map50_95: 0.61234 },
    { class_id: 1, name: 'square', images: 3, instances: 5, precision: 0.7, recall: 0.6, map50: 0.65, map50_95: 0.41 },
  ]
  const model = {
    id: 'cd'.repeat(32), ref: 'shapes@v2', name: 'shapes', seq: 2, tags: [], job_id: 902, attempt: 1, created_ms: Date.now(), host: 'h',
    config_hash: 'ef'.repeat(32), kestrel_version: '0.1.0', dataset_version: '12'.repeat(32), metrics: { map50: 0.75, map50_95: 0.51 },
    weights: { format: 'safetensors', bytes: 1234, sha256: 'cd'.repeat(32) },
    lineage: { dataset: 'shapes', parent: { kind: 'pretrained', path: '/h/objects/ab/' + 'ab'.repeat(32), model: { id: 'ab'.repeat(32), ref: 'base@v1' } } },
    evaluation: { metrics: { map50: 0.75, map50_95: 0.51, best_epoch: 10, epochs: 12, fitness: 0.534 }, per_class: perClass, plots: plots.map((file) => ({ file, sha256: 'x', bytes: 1 })) },
    exports: [],
  }
  await page.route('**/api/models/shapes%40v2', (route) => route.fulfill(json({ ok: true, model })))
  await page.route('**/api/models/shapes@v2', (route) => route.fulfill(json({ ok: true, model })))
  const plotRequests = []
  await page.route(/\/api\/models\/shapes(%40|@)v2\/plots\//, (route) => {
    const file = decodeURIComponent(new URL(route.request().url()).pathname.split('/').pop())
    plotRequests.push(file)
    return route.fulfill({ status: 200, contentType: 'image/png', body: png(64, 48, colours[file] || [0, 0, 0]) })
  })
  await page.goto(`${base}/#/models/shapes@v2`)
  await byTest('model-plots').waitFor({ timeout: WAIT })
  await waitFor(async () => (await page.locator('[data-testid="model-plots"] img').evaluateAll((imgs) => imgs.filter((i) => i.complete && i.naturalWidth === 64).length)) === plots.length, 'every stored plot drawn')
  const order = await page.locator('[data-testid="model-plots"] figure').evaluateAll((fs) => fs.map((f) => f.dataset.testid))
  assert.deepEqual(order.slice(0, 4), ['plot-PR_curve.png', 'plot-F1_curve.png', 'plot-confusion_matrix_normalized.png', 'plot-results.png'])
  // best_epoch and epochs as integers, a measure with 4 decimals.
  const metricsText = await page.locator('.el-table').first().innerText()
  assert.match(metricsText, /best_epoch\s+10\n/)
  assert.ok(!/10\.0000/.test(metricsText), metricsText)
  assert.match(metricsText, /fitness\s+0\.5340/)
  assert.equal(await byTest('parent-link').getAttribute('href'), '#/models/base%40v1')
  // Per-class table and its CSV.
  const table = await byTest('per-class-table').innerText()
  assert.match(table, /circle/)
  assert.match(table, /0\.6123/)
  const [download] = await Promise.all([page.waitForEvent('download'), byTest('per-class-csv').click()])
  const csv = fs.readFileSync(await download.path(), 'utf8')
  assert.match(csv.split('\n')[0], /name/)
  assert.match(csv, /square/)
  await shot('model')
  // Export: the server's own check refuses a bad imgsz, under that field; a good one queues a job.
  let posted = null
  await byTest('model-export').click()
  await byTest('export-imgsz').fill('63')
  await byTest('export-submit').click()
  await byTest('export-error-imgsz').waitFor({ timeout: WAIT })
  const refusal = await byTest('export-error-imgsz').innerText()
  await shot('export-refused')
  await page.route('**/api/jobs', async (route) => {
    if (route.request().method() !== 'POST') return route.fallback()
    posted = route.request().postDataJSON()
    return route.fulfill(json({ ok: true, job_id: 950, created: true, dedup_key: 'k' }, 201))
  })
  // Try it in place: the page follows job 950 (running, then succeeded)
  // and opens the model's new verified ONNX export in Try it, no reload.
  const made = { id: 'ee'.repeat(32), format: 'onnx', verified: true, options: { imgsz: 64, half: true }, path: '/h/exports/e.onnx', bytes: 10, created_ms: Date.now() }
  let polls = 0
  await page.route('**/api/jobs/950', (route) => {
    const st = ++polls < 2 ? 'running' : 'succeeded'
    if (st === 'succeeded') model.exports = [made]
    return route.fulfill(json({ ok: true, job: { id: 950, kind: 'export', state: st, config: {} }, attempts: [] }))
  })
  assert.equal(await byTest('exports-none').count(), 1)
  await byTest('export-imgsz').fill('64')
  await byTest('export-half').click()
  await byTest('export-submit').click()
  await byTest('export-queued').waitFor({ timeout: WAIT })
  assert.deepEqual(posted, { keys: { kind: 'export', model: 'shapes@v2', format: 'onnx', imgsz: '64', half: 'true' } })
  assert.equal(await byTest('export-queued').locator('a').getAttribute('href'), '#/jobs/950')
  await shot('export-queued')
  await page.keyboard.press('Escape')
  await page.waitForFunction(() => document.querySelector('[data-testid="export-follow"]')?.dataset.state === 'running', null, { timeout: WAIT })
  await page.waitForFunction((id) => document.querySelector('[data-testid="tryit"]')?.dataset.export === id, made.id, { timeout: WAIT })
  assert.match(await byTest('export-follow').innerText(), /^Export job #950: succeeded — its export is open in Try it below/)
  assert.equal(await byTest(`export-try-${made.id.slice(0, 12)}`).isEnabled(), true)
  assert.equal(await byTest('exports-none').count(), 0)
  await shot('export-try-in-place')
  await page.unroute('**/api/jobs/950')
  await page.unroute('**/api/jobs')
  assert.match(refusal, /imgsz 63 must be a multiple of the max stride 32/, refusal)
  assert.deepEqual(jsErrors, [])
})
