// Issue 33 "System usage" in a real browser: Debian's Chromium driven by
// playwright-core against `kestrel serve --public-read` on a temporary home,
// and a real `kestrel worker --usage-s 1` training a tiny job. The worker
// samples its trainer (CPU %, RSS; GPU only where nvidia-smi is) into the
// job's sys/ metric series and its own row of /api/workers; the System
// page charts each worker's CPU % and RSS over time and names the busy
// worker's latest figures in its row, and the job page draws the sys/
// series in its two System panels (% and MB) on a wall-seconds axis, the
// points the metrics route serves. Screenshots go to KESTREL_WEB_ARTIFACTS.
//   KESTREL_CLI=build/src/cli/kestrel KESTREL_WEB_DIST=build/web/dist \
//   KESTREL_WEB_MODULES=web/node_modules node tests/web/system_usage.test.mjs
// Exits 77 (ctest: skipped) without chromium or web/node_modules, or when
// this kestrel cannot run `kestrel worker` (no LibTorch). ~25 s.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { CLI, DIST, ARTIFACTS, CHROMIUM, chromiumOrSkip, startKestrelServe } from './harness.mjs'

const chromium = chromiumOrSkip()

const WAIT = 30000 // the trainer starts and samples on a loaded 2-core VM
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kestrel-web-usage-'))
const home = path.join(tmp, 'home')
let server = null
let worker = null
let workerErr = ''
let base = ''
let browser = null
let page = null
let jobId = 0
const jsErrors = []

const kestrel = (...args) => execFileSync(CLI, ['--home', home, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
const kestrelJson = (...args) => JSON.parse(kestrel('--json', ...args))

function startServer() {
  return startKestrelServe({ home, args: ['--port', '0', '--public-read', '--web-dir', DIST], wait: WAIT })
}

const byTest = (id) => page.locator(`[data-testid="${id}"]`)
// A chart's series as [[x, y], ...] (typed arrays unpacked), its axis names.
const chartOption = (id) =>
  page.evaluate((sel) => {
    const el = document.querySelector(sel)
    if (!el || !el.echart) return null
    const o = el.echart.getOption()
    const pairs = (d) => (ArrayBuffer.isView(d) ? Array.from({ length: d.length / 2 }, (_, i) => [d[2 * i], d[2 * i + 1]]) : d)
    return {
      xAxis: o.xAxis.map((a) => ({ name: a.name, type: a.type })),
      series: o.series.filter(Boolean).map((s) => ({ name: s.name, data: pairs(s.data) })),
    }
  }, `[data-testid="${id}"]`)
async function waitFor(fn, what) {
  let last
  for (const until = Date.now() + WAIT; Date.now() < until; await page.waitForTimeout(250)) {
    last = await fn().catch((e) => e)
    if (last === true) return
  }
  assert.fail(`${what}: ${last instanceof Error ? last.stack : JSON.stringify(last)}`)
}
const shot = (name) => page.screenshot({ path: path.join(ARTIFACTS, `system-usage-${name}.png`), fullPage: true })
const hasNvidiaSmi = (process.env.PATH || '').split(':').some((d) => d.startsWith('/') && fs.existsSync(path.join(d, 'nvidia-smi')))

before(async () => {
  assert.ok(fs.existsSync(CLI), `${CLI} is not built`)
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} is not built (scripts/build-web.sh)`)
  fs.mkdirSync(home)
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  kestrel('dataset', 'synth', path.join(tmp, 'data'), '--images', '12', '--imgsz', '64', '--seed', '3')
  kestrel('dataset', 'import', path.join(tmp, 'data'), '--name', 'tiny')
  // About a second an epoch on one core: it trains through both tests (the worker is stopped after).
  jobId = kestrelJson('submit', 'data=tiny', 'model=t', 'imgsz=64', 'batch=4', 'workers=1', 'threads=1', 'plots=false', 'epochs=40', 'warmup_epochs=0').job_id
  const s = await startServer()
  server = s.proc
  base = s.url
  worker = spawn(
    CLI,
    ['--home', home, 'worker', '--id', 'web-usage', '--usage-s', '1', '--skip-doctor', '--no-webhooks', '--exit-when-idle', '--heartbeat-s', '1', '--poll-s', '0.2'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  worker.stderr.on('data', (d) => (workerErr += d))
  const early = await new Promise((resolve) => {
    const t = setTimeout(() => resolve(null), 3000)
    worker.once('exit', (code) => {
      clearTimeout(t)
      resolve(code)
    })
  })
  if (early !== null && /without LibTorch/.test(workerErr)) {
    console.log('SKIP: this kestrel cannot run `kestrel worker` (no LibTorch)')
    server.kill('SIGTERM')
    fs.rmSync(tmp, { recursive: true, force: true })
    process.exit(77)
  }
  assert.equal(early, null, `the worker exited ${early}: ${workerErr}`)
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] })
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  page.on('pageerror', (e) => jsErrors.push(String(e)))
})

after(async () => {
  if (browser) await browser.close()
  if (worker && worker.exitCode === null) {
    // Stopped as an operator would: the trainer is handed back, nothing is left running.
    const exited = new Promise((resolve) => worker.once('exit', resolve))
    worker.kill('SIGTERM')
    const t = setTimeout(() => worker.kill('SIGKILL'), 20000)
    await exited
    clearTimeout(t)
  }
  if (server) server.kill('SIGTERM')
  fs.rmSync(tmp, { recursive: true, force: true })
})

test('system page: the busy worker\'s CPU % and RSS charted over time and named in its row', async () => {
  await page.goto(`${base}/#/system`)
  await byTest('worker-state-web-usage').waitFor({ timeout: WAIT })
  // Two samples at least, taken while the page looked: a line, not a dot.
  await waitFor(async () => {
    const cpu = await chartOption('usage-cpu-chart')
    const line = cpu && cpu.series.find((s) => s.name === 'web-usage')
    return (line && line.data.length >= 2) || `cpu chart: ${JSON.stringify(cpu)}`
  }, 'two CPU samples of web-usage on the System page')
  const cpu = await chartOption('usage-cpu-chart')
  const rss = await chartOption('usage-rss-chart')
  assert.equal(cpu.xAxis[0].type, 'time')
  const rssLine = rss.series.find((s) => s.name === 'web-usage')
  assert.ok(rssLine && rssLine.data.length >= 1, JSON.stringify(rss))
  // A trainer holds tens of MB at least; its x values are the samples' wall-clock times.
  assert.ok(rssLine.data.some(([, mb]) => mb > 20), JSON.stringify(rssLine.data))
  const now = Date.now()
  for (const [ms] of cpu.series[0].data) assert.ok(Math.abs(ms - now) < 10 * 60000, `sample time ${ms} vs ${now}`)
  // The row names the latest figures while the job runs.
  await waitFor(async () => /^CPU [\d.]+ % · RSS [\d.]+ MB/.test((await byTest('worker-usage-web-usage').innerText().catch(() => '')).trim()) || 'no usage in the row', 'the worker row\'s usage')
  // The route says the same worker measured them.
  const doc = await (await fetch(`${base}/api/workers`)).json()
  const w = doc.workers.find((x) => x.id === 'web-usage')
  assert.ok(w.usage && typeof w.usage.cpu_percent === 'number' && w.usage.interval_ms === 1000, JSON.stringify(w.usage))
  assert.equal(hasNvidiaSmi || !('gpu_util' in w.usage), true, 'no GPU figure without nvidia-smi')
  if (!hasNvidiaSmi) assert.equal(await byTest('usage-gpuUtil-chart').count(), 0)
  await shot('system')
})

test('job page: the trainer\'s sys/ series in the System panels, on wall seconds, as the route serves them', async () => {
  // Enough samples for a line on the job page too.
  await waitFor(async () => {
    const m = await (await fetch(`${base}/api/jobs/${jobId}/metrics?series=sys/cpu_percent,sys/rss_mb`)).json()
    return m.series.every((s) => s.x === 'time' && s.data.length >= 3) || JSON.stringify(m.series)
  }, 'three usage samples in the metrics route')
  const route = await (await fetch(`${base}/api/jobs/${jobId}/metrics`)).json()
  const names = route.names.filter((n) => n.name.startsWith('sys/'))
  assert.deepEqual(names.map((n) => n.name).sort(), hasNvidiaSmi ? names.map((n) => n.name).sort() : ['sys/cpu_percent', 'sys/rss_mb'])
  await page.goto(`${base}/#/jobs/${jobId}`)
  await byTest('sys-util-chart').locator('canvas').first().waitFor({ timeout: WAIT })
  await byTest('sys-mem-chart').locator('canvas').first().waitFor({ timeout: WAIT })
  const util = await chartOption('sys-util-chart')
  const mem = await chartOption('sys-mem-chart')
  assert.deepEqual(util.series.map((s) => s.name).filter((n) => n === 'sys/cpu_percent'), ['sys/cpu_percent'])
  assert.deepEqual(mem.series.map((s) => s.name).filter((n) => n === 'sys/rss_mb'), ['sys/rss_mb'])
  assert.equal(util.xAxis[0].name, 'wall s')
  assert.match(await byTest('panel-sys-util').innerText(), /CPU/)
  assert.match(await byTest('panel-sys-mem').innerText(), /MB/)
  // The drawn points are the route's (the page may have appended newer live ones).
  const served = route.series.find((s) => s.name === 'sys/cpu_percent').data
  const drawn = util.series.find((s) => s.name === 'sys/cpu_percent').data
  assert.ok(drawn.length >= served.length, `${drawn.length} drawn, ${served.length} served`)
  assert.deepEqual(drawn.slice(0, served.length), served)
  // Live: a sample written after the page loaded is appended without a reload.
  const before = drawn.length
  await waitFor(async () => {
    const d = (await chartOption('sys-util-chart')).series.find((s) => s.name === 'sys/cpu_percent').data
    return d.length > before || `still ${d.length} points`
  }, 'a live usage sample on the job page')
  await shot('job')
  // The two System panels at full size (the page's shot is 4,000 px tall).
  const a = await byTest('panel-sys-util').boundingBox()
  const b = await byTest('panel-sys-mem').boundingBox()
  const top = Math.min(a.y, b.y)
  await page.screenshot({ path: path.join(ARTIFACTS, 'system-usage-job-panels.png'), fullPage: true, clip: { x: 0, y: top, width: 1280, height: Math.max(a.y + a.height, b.y + b.height) - top } })
  assert.deepEqual(jsErrors, [])
})
