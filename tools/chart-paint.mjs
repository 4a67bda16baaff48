#!/usr/bin/env node
// Browser benchmark of a job page's training charts (not a test;
// docs/server.md "Performance"), in Debian's Chromium driven by
// playwright-core (web/node_modules) as tests/web/ui.test.mjs does:
//
//  1. first paint: a job with SERIES step series x POINTS points each (one
//     metric event per step carrying every series' value, written through
//     the store by bench/serve_load's kestrel_bench_event_writer); the time
//     from navigation start to the iteration chart's first rendered frame
//     (the `echart-painted:Iteration losses` performance mark that
//     web/src/components/EChart.vue sets on ECharts' first "finished"),
//     over --runs fresh page loads; each load must open its event stream
//     after the history (Last-Event-ID = the metrics document's
//     last_event_id, the id of the job's last event), not replay it;
//  2. live latency: on that page (its stream caught up), --samples metric
//     events appended one at a time at random moments; for each, the time
//     from the event's created_ms (its write) to the chart's first rendered
//     frame holding its point (ECharts' "finished"), p50/p95/max.
//
//   node tools/chart-paint.mjs [--series 20] [--points 100000] [--runs 5]
//        [--samples 20] [--json report.json] [--kestrel build/src/cli/kestrel]
//        [--writer build/bench/serve_load/kestrel_bench_event_writer]
//        [--dist build/web/dist] [--cpu yes]
//  --cpu yes: each load also traced (Chrome's devtools.timeline trace
//  events through the page's CDP session): the renderer main thread's CPU
//  time from navigation start to the mark, the sum of its tasks' wall time,
//  and the CPU of the tasks from the metrics document to the mark — on a
//  shared machine the wall-clock paint is mostly waiting for a core, the
//  CPU time much less so.
// Exits 0 after printing the figures, 2 on a setup error (77: no chromium
// or web/node_modules).
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import readline from 'node:readline'
import { BUILT, benchHome, launchBrowser, parseOptions, playwrightChromium, repo, requireBuilt, startServer } from './lib/bench.mjs'

const opts = parseOptions('chart-paint', { series: 20, points: 100000, runs: 5, samples: 20, json: '', cpu: 'no', ...BUILT })
if (!['yes', 'no'].includes(opts.cpu)) {
  console.error(`chart-paint: --cpu must be yes or no`)
  process.exit(2)
}
const chromium = playwrightChromium(opts)
requireBuilt('chart-paint', [opts.kestrel, opts.writer, path.join(opts.dist, 'index.html')], 'ninja -C build kestrel kestrel_bench_event_writer; scripts/build-web.sh')

const { tmp, home, track, kestrel, kestrelJson, log } = benchHome('chart-paint', opts)
let server = null
let writer = null
let context = null
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function pct(values, p) {
  const s = [...values].sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : null
}

async function main() {
  fs.mkdirSync(home)
  kestrel('dataset', 'synth', path.join(tmp, 'synth'), '--images', '8', '--classes', '2', '--imgsz', '64')
  kestrel('dataset', 'import', path.join(tmp, 'synth'), '--name', 'shapes')
  const job = kestrelJson('submit', 'data=shapes', 'model=n', 'epochs=1', 'imgsz=64').job_id
  let token = ''
  try {
    token = kestrelJson('token', 'create', '--name', 'chart-paint', '--read-only').token
  } catch {
    token = ''
  }
  let t0 = Date.now()
  const lastBulkId = Number(execFileSync(opts.writer, [home, String(job), 'bulk', String(opts.series), String(opts.points)], { encoding: 'utf8' }).trim())
  log(`job ${job}: ${opts.points} step events x ${opts.series} series written in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  const s = await startServer(opts, home, ['--web-dir', opts.dist])
  server = track(s.proc)
  const base = s.url
  const headers = token ? { Authorization: `Bearer ${token}` } : {}
  // The route alone, as the page asks for it (1280 px page: width ~600).
  const routeMs = []
  for (let i = 0; i < 8; i++) {
    t0 = performance.now()
    const r = await fetch(`${base}/api/jobs/${job}/metrics?width=600`, { headers })
    const doc = await r.json()
    routeMs.push(performance.now() - t0)
    if (!doc.ok || doc.series.length !== opts.series) throw new Error(`metrics route: ${JSON.stringify(doc).slice(0, 300)}`)
  }
  log(`GET /api/jobs/${job}/metrics?width=600: ${routeMs.map((m) => m.toFixed(0)).join(', ')} ms`)

  context = await launchBrowser(chromium, opts, path.join(tmp, 'profile'))
  const page = context.pages()[0] || (await context.newPage())
  if (token) await page.addInitScript((t) => localStorage.setItem('kestrel.token', t), token)
  const MARK = 'echart-painted:Iteration losses'
  // The page reports the mark itself (a PerformanceObserver calling a
  // binding): polling for it with page.waitForFunction ran Playwright's
  // injected script and a poll every 50 ms on the main thread the load is
  // timing (~15-35 ms of a first paint).
  let painted = null
  await page.exposeBinding('__kestrelBenchPainted', (_source, ms) => painted && painted(ms))
  await page.addInitScript((mark) => {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (e.name === mark) window.__kestrelBenchPainted(e.startTime)
    }).observe({ type: 'mark' })
  }, MARK)
  const cdp = opts.cpu === 'yes' ? await context.newCDPSession(page) : null
  // Main-thread CPU of one traced load: [cpu to the mark, its tasks' wall, cpu from metrics-doc to the mark] in ms.
  async function mainThreadCpu(events) {
    const main = new Set(events.filter((e) => e.name === 'thread_name' && e.args.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`))
    const at = (name) => events.find((e) => e.name === name)
    const nav = at('navigationStart')
    const end = at(MARK)
    const doc = at('metrics-doc')
    if (!nav || !end) return null
    let cpu = 0
    let wall = 0
    let afterDoc = 0
    for (const e of events) {
      if (e.ph !== 'X' || !main.has(`${e.pid}:${e.tid}`) || !['RunTask', 'ThreadControllerImpl::RunTask'].includes(e.name)) continue
      if (e.ts < nav.ts || e.ts > end.ts) continue
      cpu += (e.tdur || 0) / 1000
      wall += e.dur / 1000
      if (doc && e.ts + e.dur >= doc.ts) afterDoc += (e.tdur || 0) / 1000
    }
    return [cpu, wall, afterDoc].map(Math.round)
  }
  const cpuRuns = []
  async function firstPaints() {
    const out = []
    for (let i = 0; i < opts.runs; i++) {
      await page.goto('about:blank')
      let events = null
      if (cdp) {
        events = []
        cdp.on('Tracing.dataCollected', (e) => events.push(...e.value))
        await cdp.send('Tracing.start', { categories: 'devtools.timeline,disabled-by-default-devtools.timeline,blink.user_timing,loading', transferMode: 'ReportEvents' })
      }
      const seen = new Promise((resolve, reject) => {
        painted = resolve
        setTimeout(() => reject(new Error(`no '${MARK}' mark within 60 s`)), 60000).unref()
      })
      await page.goto(`${base}/#/jobs/${job}`)
      out.push(await seen)
      painted = null
      let cpuText = ''
      if (cdp) {
        const done = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve))
        await cdp.send('Tracing.end')
        await done
        cdp.removeAllListeners('Tracing.dataCollected')
        const c = await mainThreadCpu(events)
        if (c) {
          cpuRuns.push(c)
          cpuText = `; main thread CPU ${c[0]} ms (its tasks' wall ${c[1]} ms), ${c[2]} ms of it from the document to the frame`
        }
      }
      // Where the time went: the document loaded, the app mounted (main.js's
      // mark), the metrics request out and back, its document parsed
      // (TrainingCharts.vue's mark), the charts' first frame.
      const t = await page.evaluate(() => {
        const nav = performance.getEntriesByType('navigation')[0]
        const m = performance.getEntriesByType('resource').find((r) => r.name.includes('/metrics?'))
        const mark = (name) => (performance.getEntriesByName(name)[0] || { startTime: -1 }).startTime
        return [nav.domContentLoadedEventEnd, mark('app-mounted'), m ? m.startTime : -1, m ? m.responseEnd : -1, mark('metrics-doc')].map(Math.round)
      })
      log(
        `  DOMContentLoaded ${t[0]} ms, app mounted ${t[1]} ms, metrics request ${t[2]}..${t[3]} ms, its document parsed ${t[4]} ms, charts painted ${Math.round(out[out.length - 1])} ms${cpuText}`,
      )
    }
    return out
  }
  // Every stream request of the page must start after the history.
  const streamFrom = []
  page.on('request', (r) => {
    if (r.url().endsWith(`/api/jobs/${job}/events`)) streamFrom.push(r.headers()['last-event-id'])
  })
  const paints = await firstPaints()
  log(`first paint (ms from navigation start): ${paints.map((m) => m.toFixed(0)).join(', ')}`)
  if (!streamFrom.length || streamFrom.some((id) => Number(id) !== lastBulkId))
    throw new Error(`the page's event streams started at ${JSON.stringify(streamFrom)}, not after the history (${lastBulkId})`)
  const drawn = await page.evaluate(() => {
    const el = document.querySelector('[data-testid="iter-chart"]')
    // A line's data is a flat Float64Array [x0, y0, x1, y1, ...] (TrainingCharts.vue).
    return el.echart.getOption().series.filter(Boolean).map((s) => (ArrayBuffer.isView(s.data) ? s.data.length / 2 : s.data.length))
  })
  if (drawn.length !== opts.series) throw new Error(`the iteration chart draws ${drawn.length} series, not ${opts.series}`)
  fs.mkdirSync(path.join(repo, 'build/bench/serve_load'), { recursive: true })
  await page.screenshot({ path: path.join(repo, 'build/bench/serve_load/chart-paint.png'), fullPage: true })
  log(`${drawn.length} series of ${Math.min(...drawn)}..${Math.max(...drawn)} points drawn`)

  // Live: one event at a time through the store; time until the chart has it.
  writer = track(spawn(opts.writer, [home, String(job), 'stdin', String(opts.series)], { stdio: ['pipe', 'pipe', 'inherit'] }))
  const answers = readline.createInterface({ input: writer.stdout })
  const waiting = []
  answers.on('line', (l) => waiting.shift()(l))
  const write = (x) =>
    new Promise((resolve) => {
      waiting.push(resolve)
      writer.stdin.write(`${x}\n`)
    })
  const live = []
  for (let i = 0; i < opts.samples; i++) {
    await sleep(200 + Math.random() * 300)
    const x = opts.points + 1 + i
    // Resolved on the first rendered frame whose last point is x (ECharts'
    // "finished"), so the probe itself adds no polling to the page.
    await page.evaluate((want) => {
      const chart = document.querySelector('[data-testid="iter-chart"]').echart
      window.__seen = new Promise((resolve) => {
        const check = () => {
          const s = chart.getModel().getSeries().find((m) => m.name === 'iter/s00')
          const d = s && s.getData()
          if (d && d.count() && d.getValues(d.count() - 1)[0] === want) {
            chart.off('finished', check)
            resolve(Date.now())
          }
        }
        chart.on('finished', check)
        setTimeout(() => resolve(null), 10000)
      })
    }, x)
    const [, createdMs] = (await write(x)).split(' ').map(Number)
    const seenMs = await page.evaluate(() => window.__seen)
    if (seenMs === null) throw new Error(`point ${x} not drawn within 10 s`)
    live.push(seenMs - createdMs)
  }
  writer.stdin.end()
  log(`live (ms from write to the chart holding the point): ${live.join(', ')}`)
  const report = {
    series: opts.series,
    points: opts.points,
    metrics_route_ms: routeMs.map((m) => Math.round(m)),
    first_paint_ms: paints.map((m) => Math.round(m)),
    first_paint_median_ms: Math.round(pct(paints, 50)),
    main_thread_cpu_ms: cpuRuns.map((c) => c[0]),
    main_thread_cpu_median_ms: cpuRuns.length ? pct(cpuRuns.map((c) => c[0]), 50) : null,
    points_drawn_per_series: Math.max(...drawn),
    live_ms: { n: live.length, p50: pct(live, 50), p95: pct(live, 95), max: Math.max(...live) },
  }
  console.log(`chart-paint: ${opts.series} series x ${opts.points} points: first paint median ${report.first_paint_median_ms} ms (runs: ${report.first_paint_ms.join(', ')} ms); metrics route ${report.metrics_route_ms.join(', ')} ms`)
  if (cpuRuns.length)
    console.log(`main thread CPU to the first frame: median ${report.main_thread_cpu_median_ms} ms (runs: ${report.main_thread_cpu_ms.join(', ')} ms)`)
  console.log(`live: a logged value on the open chart after p50 ${report.live_ms.p50} ms, p95 ${report.live_ms.p95} ms, max ${report.live_ms.max} ms (${live.length} samples)`)
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(report, null, 2) + '\n')
  await context.close()
  server.kill('SIGTERM')
  process.exit(0)
}

main().catch(async (e) => {
  log(e.stack || String(e))
  if (context) await context.close().catch(() => {})
  process.exit(2)
})
