#!/usr/bin/env node
// Load benchmark of `kestrel serve` (not a test; docs/server.md
// "Performance"): N SSE clients on /api/events plus a mixed REST load on
// loopback for a while, against a temporary home with a few datasets, jobs
// and models, while a writer process appends a training job's metric events
// through the store (bench/serve_load: kestrel_bench_event_writer).
//
//   node tools/serve-load.mjs [--seconds 60] [--clients 200] [--rest-rate 100]
//        [--rate 20] [--series 3] [--history 20000] [--json report.json]
//        [--kestrel build/src/cli/kestrel]
//        [--writer build/bench/serve_load/kestrel_bench_event_writer]
//
// Reports: errors (REST non-2xx or failed requests, event streams that ended
// or failed, ids out of order, duplicated or missing events), REST latency
// p50/p99/max per route (client-side, request sent -> body read), SSE
// delivery latency p50/p99 (the event's created_ms -> the client parsed
// it), events delivered, and the server's RSS and CPU time at the start,
// middle and end. Exits 1 when there was any error, 2 on a setup error.
//
// The REST load is open-loop: requests start at --rest-rate per second
// whatever the answers take (a closed loop would hide queueing), at most
// 64 in flight. The client is Node on the same machine: its own delays are
// in the figures (the event loop's lag is reported too).
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { BUILT, benchHome, parseOptions, requireBuilt, startServer } from './lib/bench.mjs'

const opts = parseOptions(
  'serve-load',
  {
    seconds: 60,
    clients: 200,
    'rest-rate': 100,
    rate: 20, // metric events per second from the writer
    series: 3, // values per metric event
    history: 20000, // step events already in the store for the job the metrics route reads
    json: '',
    kestrel: BUILT.kestrel,
    writer: BUILT.writer,
  },
  { min: 0, usage: fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(5, 10).join('\n') },
)
requireBuilt('serve-load', [opts.kestrel, opts.writer], 'ninja -C build kestrel kestrel_bench_event_writer')

const { tmp, home, track, kestrel, kestrelJson, log } = benchHome('serve-load', opts)
let server = null
let writer = null

// ---- the store: 3 datasets, 12 jobs, 3 models, a long run's history ----
function setup() {
  fs.mkdirSync(home)
  for (const [name, n] of [['shapes', 8], ['birds', 16], ['cars', 24]]) {
    kestrel('dataset', 'synth', path.join(tmp, name), '--images', String(n), '--classes', '3', '--imgsz', '64')
    kestrel('dataset', 'import', path.join(tmp, name), '--name', name)
  }
  const jobs = []
  for (let i = 0; i < 12; i++)
    jobs.push(kestrelJson('submit', `data=${['shapes', 'birds', 'cars'][i % 3]}`, 'model=n', `epochs=${1 + i}`, 'imgsz=64').job_id)
  const header = Buffer.from(JSON.stringify({ w: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }))
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(header.length))
  const weights = path.join(tmp, 'w.safetensors')
  fs.writeFileSync(weights, Buffer.concat([len, header, Buffer.from(new Float32Array([1]).buffer)]))
  for (const name of ['shapes', 'birds', 'cars']) kestrel('models', 'register', weights, '--name', name, `data=${name}`)
  let token = ''
  try {
    token = kestrelJson('token', 'create', '--name', 'serve-load', '--read-only').token
  } catch {
    token = '' // a build without tokens: reads are open
  }
  const t0 = Date.now()
  const last = execFileSync(opts.writer, [home, String(jobs[0]), 'bulk', String(opts.series), String(opts.history)], { encoding: 'utf8' })
  log(`store: 3 datasets, ${jobs.length} jobs, 3 models; job ${jobs[0]} has ${opts.history} step events x ${opts.series} series (${Date.now() - t0} ms to write, last id ${last.trim()})`)
  return { jobs, token, lastId: Number(last.trim()) }
}

// RSS (KiB) and CPU seconds (user + system) of a process, from /proc.
function procStats(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)[1])
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = 100 // USER_HZ on Linux
  return { rss_kib: rss, cpu_s: (Number(f[11]) + Number(f[12])) / ticks }
}

function pct(sorted, p) {
  if (!sorted.length) return null
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}
function summary(values) {
  const s = Float64Array.from(values).sort()
  return { n: s.length, p50: pct(s, 50), p99: pct(s, 99), max: s.length ? s[s.length - 1] : null }
}

const errors = []
function error(what) {
  if (errors.length < 1000) errors.push(what)
  else errors.length++
}

// ---- SSE clients ----
function sseClient(url, token, after, stats) {
  const c = { last: after, events: 0, done: false, req: null }
  const headers = { Accept: 'text/event-stream' }
  if (token) headers.Authorization = `Bearer ${token}`
  c.req = http.get({ host: url.hostname, port: url.port, path: `/api/events?last_event_id=${after}`, headers, agent: false }, (res) => {
    if (res.statusCode !== 200) {
      error(`sse: status ${res.statusCode}`)
      res.resume()
      return
    }
    res.setEncoding('utf8')
    let buf = ''
    res.on('data', (chunk) => {
      buf += chunk
      let end
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end)
        buf = buf.slice(end + 2)
        let id = null
        let data = null
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) id = Number(line.slice(4))
          else if (line.startsWith('data: ')) data = line.slice(6)
        }
        if (id === null) continue // retry: / keep-alive
        const now = Date.now()
        if (id <= c.last) error(`sse: id ${id} after ${c.last} (duplicate or out of order)`)
        else if (id !== c.last + 1) error(`sse: ids ${c.last + 1}..${id - 1} missing`)
        c.last = Math.max(c.last, id)
        c.events++
        try {
          const ev = JSON.parse(data)
          if (ev.id !== id) error(`sse: data id ${ev.id} under id: ${id}`)
          if (ev.kind === 'metric' && stats.measuring) stats.latency.push(now - ev.created_ms)
        } catch (e) {
          error(`sse: bad data ${String(data).slice(0, 80)}: ${e.message}`)
        }
      }
    })
    res.on('end', () => {
      if (!c.done) error('sse: the stream ended')
    })
  })
  c.req.on('error', (e) => {
    if (!c.done) error(`sse: ${e.message}`)
  })
  return c
}

// ---- REST load ----
function restRoutes(jobs) {
  const job = jobs[0]
  return [
    { route: 'GET /api/jobs', path: () => '/api/jobs?limit=50&offset=0' },
    { route: 'GET /api/jobs?state', path: () => '/api/jobs?state=queued&limit=20&offset=0' },
    { route: 'GET /api/jobs/{id}', path: () => `/api/jobs/${jobs[Math.floor(Math.random() * jobs.length)]}` },
    { route: 'GET /api/jobs/{id}/metrics', path: () => `/api/jobs/${job}/metrics?width=640` },
    { route: 'GET /api/datasets', path: () => '/api/datasets' },
    { route: 'GET /api/datasets/{name}', path: () => `/api/datasets/${['shapes', 'birds', 'cars'][Math.floor(Math.random() * 3)]}` },
    { route: 'GET /api/models', path: () => '/api/models' },
    { route: 'GET /api/models/{ref}', path: () => `/api/models/${['shapes', 'birds', 'cars'][Math.floor(Math.random() * 3)]}` },
  ]
}

function restRequest(agent, url, token, p) {
  return new Promise((resolve) => {
    const headers = token ? { Authorization: `Bearer ${token}` } : {}
    const t0 = process.hrtime.bigint()
    const req = http.get({ host: url.hostname, port: url.port, path: p, headers, agent }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }))
    })
    req.on('error', (e) => resolve({ status: 0, error: e.message, ms: Number(process.hrtime.bigint() - t0) / 1e6 }))
  })
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main() {
  let store
  try {
    store = setup()
  } catch (e) {
    log(`setup failed: ${e.message}\n${e.stderr || ''}`)
    process.exit(2)
  }
  const s = await startServer(opts, home)
  server = track(s.proc)
  const url = new URL(s.url)
  log(`server ${url.href} pid ${server.pid}`)
  const stats = { latency: [], measuring: false }
  const clients = []
  for (let i = 0; i < opts.clients; i++) clients.push(sseClient(url, store.token, store.lastId, stats))
  // Every client connected (the server counts them in /metrics).
  for (const until = Date.now() + 15000; ; await sleep(100)) {
    const r = await fetch(`${url.origin}/metrics`, { headers: store.token ? { Authorization: `Bearer ${store.token}` } : {} })
    const m = /^kestrel_sse_clients (\d+)/m.exec(await r.text())
    if (m && Number(m[1]) >= opts.clients) break
    if (Date.now() > until) {
      log(`only ${m ? m[1] : '?'} of ${opts.clients} event streams opened`)
      process.exit(2)
    }
  }
  // The metrics route's first request for a job folds its whole history
  // (then kept, docs/server.md "Metric series"): timed here, outside the load.
  const cold0 = performance.now()
  const cold = await fetch(`${url.origin}/api/jobs/${store.jobs[0]}/metrics?width=640`, { headers: store.token ? { Authorization: `Bearer ${store.token}` } : {} })
  await cold.arrayBuffer()
  const coldMs = performance.now() - cold0
  if (cold.status !== 200) error(`rest: the first metrics request: ${cold.status}`)
  log(`first GET /api/jobs/${store.jobs[0]}/metrics (folds ${opts.history} events): ${coldMs.toFixed(0)} ms`)
  const rss = { start: procStats(server.pid) }
  const loadStart = fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]
  log(`${opts.clients} event streams open; RSS ${rss.start.rss_kib} KiB; running ${opts.seconds} s at ${opts['rest-rate']} REST requests/s and ${opts.rate} metric events/s`)

  writer = track(spawn(opts.writer, [home, String(store.jobs[0]), 'live', String(opts.series), String(opts.rate), String(opts.seconds), String(opts.history + 1)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  }))
  let writerOut = ''
  writer.stdout.on('data', (d) => (writerOut += d))
  const writerDone = new Promise((r) => writer.on('exit', (code) => r(code)))
  stats.measuring = true

  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  const routes = restRoutes(store.jobs)
  const rest = Object.fromEntries(routes.map((r) => [r.route, []]))
  let inFlight = 0
  let skipped = 0
  const pending = []
  let lagMax = 0
  let lagLast = performance.now()
  const lagTimer = setInterval(() => {
    const now = performance.now()
    lagMax = Math.max(lagMax, now - lagLast - 100)
    lagLast = now
  }, 100)
  const rssSamples = []
  const rssTimer = setInterval(() => rssSamples.push(procStats(server.pid).rss_kib), 1000)
  const t0 = performance.now()
  const period = opts['rest-rate'] > 0 ? 1000 / opts['rest-rate'] : Infinity
  let k = 0
  let middleTaken = false
  for (let next = t0; performance.now() - t0 < opts.seconds * 1000; ) {
    if (!middleTaken && performance.now() - t0 >= (opts.seconds * 1000) / 2) {
      rss.middle = procStats(server.pid)
      middleTaken = true
    }
    const now = performance.now()
    if (now < next) {
      await sleep(Math.min(next - now, 50))
      continue
    }
    next += period
    if (period === Infinity) continue
    if (inFlight >= 64) {
      skipped++
      continue
    }
    const r = routes[k++ % routes.length]
    inFlight++
    pending.push(
      restRequest(agent, url, store.token, r.path()).then((res) => {
        inFlight--
        if (res.status < 200 || res.status >= 300) error(`rest: ${r.route}: ${res.status || res.error}`)
        else rest[r.route].push(res.ms)
      }),
    )
  }
  await Promise.all(pending)
  const writerCode = await writerDone
  if (writerCode !== 0) error(`the event writer exited with ${writerCode}`)
  const lastWritten = Number((/last id (\d+)/.exec(writerOut) || [0, 0])[1])
  // Let the streams deliver the last events (poll interval + margin).
  for (const until = Date.now() + 5000; Date.now() < until && clients.some((c) => c.last < lastWritten); ) await sleep(50)
  stats.measuring = false
  rss.end = procStats(server.pid)
  // The server's own view (its /metrics latency histogram: from the request
  // read to the response written, without the client's or the kernel's
  // queueing): the share of this run's REST requests under 10 and 50 ms.
  const scrape = await (await fetch(`${url.origin}/metrics`, { headers: store.token ? { Authorization: `Bearer ${store.token}` } : {} })).text()
  const under = { '0.01': 0, '0.05': 0, '+Inf': 0 }
  for (const m of scrape.matchAll(/^kestrel_http_request_duration_seconds_bucket\{route="([^"]*)",le="([^"]+)"\} (\d+)/gm)) {
    if (m[1].startsWith('/api/') && !m[1].includes('events') && m[2] in under) under[m[2]] += Number(m[3])
  }
  const loadEnd = fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]
  if (!rss.middle) rss.middle = rss.end
  clearInterval(lagTimer)
  clearInterval(rssTimer)
  for (const c of clients) {
    if (c.last < lastWritten) error(`sse: a client stopped at id ${c.last} of ${lastWritten}`)
    c.done = true
    c.req.destroy()
  }
  agent.destroy()
  const written = Number((/wrote (\d+)/.exec(writerOut) || [0, 0])[1])
  const report = {
    seconds: opts.seconds,
    clients: opts.clients,
    rest_rate: opts['rest-rate'],
    events_written: written,
    metrics_first_request_ms: Math.round(coldMs),
    events_per_client: clients.map((c) => c.events).reduce((a, b) => Math.min(a, b), Infinity),
    errors: errors.length,
    first_errors: errors.slice(0, 10),
    rest: Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, summary(v)])),
    rest_all: summary(Object.values(rest).flat()),
    rest_skipped_at_64_in_flight: skipped,
    sse_delivery_ms: summary(stats.latency),
    server_rss_kib: { start: rss.start.rss_kib, middle: rss.middle.rss_kib, end: rss.end.rss_kib, min: Math.min(...rssSamples), max: Math.max(...rssSamples) },
    server_cpu_s: +(rss.end.cpu_s - rss.start.cpu_s).toFixed(2),
    client_event_loop_lag_max_ms: Math.round(lagMax),
    server_side_under_10ms: +(under['0.01'] / under['+Inf']).toFixed(4),
    server_side_under_50ms: +(under['0.05'] / under['+Inf']).toFixed(4),
    loadavg_start: Number(loadStart),
    loadavg_end: Number(loadEnd),
    cpus: os.cpus().length,
  }
  const r2 = (x) => (x === null ? '-' : x.toFixed(1))
  console.log(`serve-load: ${opts.seconds} s, ${opts.clients} SSE clients, ${opts['rest-rate']} REST req/s, ${written} metric events (${opts.series} values each) on ${os.cpus().length} CPUs`)
  console.log(`errors: ${report.errors}${report.errors ? ' — ' + report.first_errors.join('; ') : ''}`)
  console.log('REST latency (ms)                    n      p50      p99      max')
  for (const [k, v] of [...Object.entries(report.rest), ['all', report.rest_all]])
    console.log(`  ${k.padEnd(32)} ${String(v.n).padStart(6)} ${r2(v.p50).padStart(8)} ${r2(v.p99).padStart(8)} ${r2(v.max).padStart(8)}`)
  const d = report.sse_delivery_ms
  console.log(`SSE delivery (written -> received): ${d.n} deliveries, p50 ${d.p50} ms, p99 ${d.p99} ms, max ${d.max} ms; fewest events one client got: ${report.events_per_client}`)
  const m = report.server_rss_kib
  console.log(`server RSS (KiB): start ${m.start}, middle ${m.middle}, end ${m.end} (min ${m.min}, max ${m.max}); server CPU ${report.server_cpu_s} s in ${opts.seconds} s`)
  console.log(`server side (its /metrics histogram, all /api requests): ${(100 * report.server_side_under_10ms).toFixed(2)}% under 10 ms, ${(100 * report.server_side_under_50ms).toFixed(2)}% under 50 ms`)
  console.log(`client event-loop lag max: ${report.client_event_loop_lag_max_ms} ms; load average ${loadStart} at the start, ${loadEnd} at the end`)
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(report, null, 2) + '\n')
  server.removeAllListeners('exit')
  server.kill('SIGTERM')
  await new Promise((r) => server.on('exit', r))
  process.exit(report.errors ? 1 : 0)
}

main().catch((e) => {
  log(e.stack || String(e))
  process.exit(2)
})
