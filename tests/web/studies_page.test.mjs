// The Studies pages in a real browser: Debian's Chromium driven by
// playwright-core against `kestrel serve` on an empty temporary home. The
// study routes are answered by the page's own mock (page.route) with the
// documents of docs/server.md "Studies", so the page is checked on the
// published shapes whatever the server's store holds: the nav entry, the
// list, a study's live trials table (states, params, value, epochs, links to
// the trials' jobs), the history / parallel-coordinates / curves charts (the
// pruned trial's curve ends at its rung) and the stop button's POST. The
// server reads without a token (--public-read); the mock answers the write.
// The last test drops the mock: the real routes' empty list and 404.
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/studies_page.test.mjs
// Exits 77 (ctest: skipped) without chromium or web/node_modules.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { CLI, DIST, ARTIFACTS, CHROMIUM, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const chromium = chromiumOrSkip()

const WAIT = 15000
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-studies-'))
const home = path.join(tmp, 'home')
let server = null
let base = ''
let browser = null
let page = null

// docs/server.md "Studies": a running study of 8 trials, 6 numbered.
const settings = { trials: 8, parallel: 2, epochs: 9, metric: 'fitness', direction: 'maximize', sampler: 'tpe', pruner: 'asha', seed: 0, min_epochs: 1, eta: 3 }
const study = {
  id: 1, name: 'shapes-lr', state: 'running', job_id: 7, space_hash: 'ab'.repeat(32), data: 'shapes@v1', model: 'n',
  settings, base: { imgsz: 64 }, counts: { queued: 1, running: 1, succeeded: 3, pruned: 1, failed: 0, infra_failed: 0 },
  spent: 4, epochs_run: 31, best: { number: 3, value: 0.412, job_id: 11 },
}
const trial = (number, state, lr0, optimizer, value, intermediate, extra = {}) => ({
  number, job_id: 8 + number, state, params: { lr0, mosaic: 0.5, optimizer }, value, intermediate,
  epochs_run: intermediate.length, pruned_at: null, promotions: 0, ...extra,
})
const trials = [
  trial(0, 'succeeded', 0.01, 'SGD', 0.301, [0.1, 0.2, 0.25, 0.27, 0.28, 0.29, 0.3, 0.3, 0.301]),
  trial(1, 'pruned', 0.09, 'SGD', null, [0.02, 0.03, 0.04, 0.05], { epochs_run: 4, pruned_at: 3 }),
  trial(2, 'succeeded', 0.002, 'AdamW', 0.25, [0.1, 0.15, 0.2, 0.21, 0.22, 0.23, 0.24, 0.25, 0.25]),
  trial(3, 'succeeded', 0.004, 'AdamW', 0.412, [0.2, 0.3, 0.35, 0.38, 0.4, 0.4, 0.41, 0.41, 0.412]),
  trial(4, 'running', 0.005, 'AdamW', null, [0.21, 0.3]),
  trial(5, 'queued', 0.0005, 'SGD', null, [], { job_id: 13 }),
]
const space = {
  params: [
    { key: 'lr0', kind: 'float', low: 1e-4, high: 0.1, log: true, step: 0 },
    { key: 'mosaic', kind: 'float', low: 0, high: 1, log: false, step: 0 },
    { key: 'optimizer', kind: 'categorical', choices: ['SGD', 'AdamW'] },
  ],
  fixed: {},
}
let stopPosts = 0

function startServer() {
  return startKestrelServe({ home, args: ['--port', '0', '--public-read', '--web-dir', DIST], wait: WAIT })
}

const byTest = (id) => page.locator(`[data-testid="${id}"]`)
// The option an EChart element was last given (EChart.vue exposes the instance).
const chartOption = (id) => page.evaluate((sel) => document.querySelector(sel).echart.getOption(), `[data-testid="${id}"]`)

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  const s = await startServer()
  server = s.proc
  base = s.url
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
  const json = (body) => ({ status: 200, contentType: 'application/json', body: JSON.stringify(body) })
  await page.route('**/api/studies**', (route) => {
    const req = route.request()
    const p = new URL(req.url()).pathname
    if (req.method() === 'POST' && p === '/api/studies/shapes-lr/stop') {
      stopPosts++
      study.state = 'stopping'
      return route.fulfill(json({ ok: true, study }))
    }
    if (p === '/api/studies') return route.fulfill(json({ ok: true, studies: [study] }))
    if (p === '/api/studies/shapes-lr') {
      return route.fulfill(json({ ok: true, study, space, trials, best: trials[3], importances: [{ key: 'lr0', importance: 0.7 }, { key: 'optimizer', importance: 0.2 }, { key: 'mosaic', importance: 0.1 }] }))
    }
    return route.fulfill({ status: 404, contentType: 'application/json', body: JSON.stringify({ ok: false, error: { code: 'not_found', message: `no study`, field: 'study' } }) })
  })
})

after(async () => {
  if (browser) await browser.close()
  if (server && server.exitCode === null) server.kill('SIGKILL')
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('the nav opens the studies list, which links each study', async () => {
  await page.goto(`${base}/#/datasets`)
  await byTest('nav-studies').click()
  await byTest('study-link-shapes-lr').waitFor({ timeout: WAIT })
  const row = (await byTest('studies-table').innerText()).replace(/\s+/g, ' ')
  assert.match(row, /shapes-lr running 4 \/ 8 tpe \/ asha 0\.4120 \(trial 3\) shapes@v1 n #7/)
})

test('a study page: live trials table, charts, pruned curve up to its rung, stop', async () => {
  await byTest('study-link-shapes-lr').click()
  await byTest('trials-table').waitFor({ timeout: WAIT })
  await byTest('trial-state-5').waitFor({ timeout: WAIT })
  // One row per trial, each linked to its train job.
  for (const t of trials) {
    assert.equal(await byTest(`trial-state-${t.number}`).innerText(), t.state)
    assert.equal(await byTest(`trial-link-${t.number}`).getAttribute('href'), `#/jobs/${t.job_id}`)
  }
  const table = (await byTest('trials-table').innerText()).replace(/\s+/g, ' ')
  assert.match(table, /# State lr0 mosaic optimizer fitness Epochs/)
  assert.match(table, /3 succeeded 0\.004 0\.5 AdamW 0\.4120 9/)
  assert.match(table, /1 pruned 0\.09 0\.5 SGD — 4 \(pruned at 3\)/)
  assert.match(await byTest('study-best').innerText(), /0\.4120/)

  const history = await chartOption('study-history')
  assert.deepEqual(history.series[0].data.map((p) => p.value), [[0, 0.301], [2, 0.25], [3, 0.412]])
  assert.deepEqual(history.series[1].data, [[0, 0.301], [2, 0.301], [3, 0.412]])
  const parallel = await chartOption('study-parallel')
  assert.deepEqual(parallel.parallelAxis.map((a) => a.name), ['lr0', 'mosaic', 'optimizer', 'fitness'])
  assert.equal(parallel.series[0].data.length, 3)
  const curves = await chartOption('study-curves')
  const pruned = curves.series.find((s) => s.name === 'trial 1')
  assert.equal(pruned.data.length, 3, 'the pruned trial reported 4 epochs but was stopped at its rung 3')
  assert.equal(pruned.lineStyle.type, 'dashed')
  assert.equal(curves.series.find((s) => s.name === 'trial 4').data.length, 2)

  fs.mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: path.join(ARTIFACTS, 'study-page.png'), fullPage: true })

  await byTest('study-stop').click()
  await page.waitForFunction(() => document.querySelector('[data-testid="study-state"]').textContent.trim() === 'stopping', null, { timeout: WAIT })
  assert.equal(stopPosts, 1)
  assert.equal(await byTest('study-stop').count(), 0, 'no stop button once stopping')
})

test('an unknown study shows the server\'s error', async () => {
  await page.goto(`${base}/#/studies/nope`)
  await byTest('error').waitFor({ timeout: WAIT })
  assert.match(await byTest('error').innerText(), /no study/)
})

test('unmocked: the real server\'s empty study list renders as the empty table', async () => {
  await page.unroute('**/api/studies**')
  await page.goto(`${base}/#/datasets`)
  await byTest('import-button').waitFor({ timeout: WAIT }) // the studies page unmounted first
  await page.goto(`${base}/#/studies`)
  await page.waitForFunction(() => /No studies yet/.test(document.body.innerText), null, { timeout: WAIT })
  assert.equal(await byTest('error').count(), 0)
  await page.screenshot({ path: path.join(ARTIFACTS, 'studies-empty.png'), fullPage: true })
  // An unknown study: the real route's 404 and its message on the page.
  await page.goto(`${base}/#/studies/nope`)
  await byTest('error').waitFor({ timeout: WAIT })
  assert.match(await byTest('error').innerText(), /nope/)
})

