#!/usr/bin/env node
// Browser benchmark of the Jobs page with a long queue (not a test;
// docs/server.md "Performance"), in Debian's Chromium driven by
// playwright-core (web/node_modules) as tests/web/ui.test.mjs does:
//
//  1. a temporary home with two datasets and --jobs jobs (two submitted
//     through the CLI, the rest copies of them written through
//     MetadataStore::SubmitJob by bench/serve_load's
//     kestrel_bench_event_writer `jobs` mode: priorities cycling
//     high/normal/low, every fourth job cancelled);
//  2. the route alone: GET /api/jobs with each filter + sort the page
//     sends (limit 100, the page's page size), --runs requests each on
//     loopback (request sent -> body parsed), median and max;
//  3. the page: #/jobs at 1280x800; --runs rounds of ten filter/sort
//     changes through the toolbar's selects (sort, priority, state,
//     dataset, and back), each timed in the page from the click on the
//     select's option to the first frame after the table shows the new
//     first rows (the ids GET /api/jobs gives for that filter + sort, the
//     list no longer aria-busy), median and max per change and overall;
//  4. virtual scrolling: the list scrolled to the end of what is loaded
//     --scrolls times (each loads the next cursor page); the rows loaded,
//     the table rows in the DOM, and the time from each scroll to the list
//     growing by the next page.
//
//   node tools/job-list.mjs [--jobs 10000] [--runs 5] [--scrolls 20]
//        [--json report.json] [--kestrel build/src/cli/kestrel]
//        [--writer build/bench/serve_load/kestrel_bench_event_writer]
//        [--dist build/web/dist]
// Exits 0 after printing the figures, 1 when the page showed other rows than
// the route, 2 on a setup error (77: no chromium or web/node_modules).
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { BUILT, benchHome, launchBrowser, parseOptions, playwrightChromium, repo, requireBuilt, startServer } from './lib/bench.mjs'

const opts = parseOptions('job-list', { jobs: 10000, runs: 5, scrolls: 20, json: '', ...BUILT })
if (opts.jobs < 2) opts.jobs = 2
const chromium = playwrightChromium(opts)
requireBuilt('job-list', [opts.kestrel, opts.writer, path.join(opts.dist, 'index.html')], 'ninja -C build kestrel kestrel_bench_event_writer; scripts/build-web.sh')

const { tmp, home, track, kestrel, kestrelJson, log } = benchHome('job-list', opts)
let context = null

const median = (v) => {
  const s = [...v].sort((a, b) => a - b)
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null
}
const fmt = (v) => `median ${median(v).toFixed(1)} ms, max ${Math.max(...v).toFixed(1)} ms (n=${v.length})`

// The page's query for a state of its toolbar (Jobs.vue: limit, filters, sort, order).
const FILTERS = ['state', 'kind', 'priority', 'dataset']
function listUrl(q, limit) {
  const p = new URLSearchParams({ limit: String(limit) })
  for (const k of FILTERS) if (q[k]) p.set(k, q[k])
  const [sort, order] = q.sort.split(':')
  p.set('sort', sort)
  p.set('order', order)
  return `/api/jobs?${p}`
}
// One round of changes through the toolbar, back to where it started:
// [label, select's test id, option's test id, the change to the query].
const CHANGES = [
  ['sort: priority high first', 'job-sort', 'sort-option-priority-desc', { sort: 'priority:desc' }],
  ['filter: priority low', 'priority-filter', 'priority-option-low', { priority: 'low' }],
  ['filter: state queued', 'state-filter', 'state-option-queued', { state: 'queued' }],
  ['sort: oldest first', 'job-sort', 'sort-option-created-asc', { sort: 'created:asc' }],
  ['filter: dataset birds', 'dataset-filter', 'dataset-option-birds', { dataset: 'birds' }],
  ['sort: state, cancelled first', 'job-sort', 'sort-option-state-desc', { sort: 'state:desc' }],
  ['filter: all states', 'state-filter', 'state-option-all', { state: '' }],
  ['filter: all priorities', 'priority-filter', 'priority-option-all', { priority: '' }],
  ['filter: all datasets', 'dataset-filter', 'dataset-option-all', { dataset: '' }],
  ['sort: newest first', 'job-sort', 'sort-option-created-desc', { sort: 'created:desc' }],
]
const START = { state: '', kind: '', priority: '', dataset: '', sort: 'created:desc' }

async function main() {
  fs.mkdirSync(home)
  let t0 = Date.now()
  const firsts = []
  for (const [name, images] of [['shapes', 8], ['birds', 12]]) {
    kestrel('dataset', 'synth', path.join(tmp, name), '--images', String(images), '--classes', '2', '--imgsz', '64')
    kestrel('dataset', 'import', path.join(tmp, name), '--name', name)
    firsts.push(kestrelJson('submit', `data=${name}`, 'model=n', 'epochs=1', 'imgsz=64').job_id)
  }
  const copies = opts.jobs - firsts.length
  for (const [i, job] of firsts.entries()) {
    const n = Math.floor(copies / 2) + (i === 0 ? copies % 2 : 0)
    if (n > 0) execFileSync(opts.writer, [home, String(job), 'jobs', String(n)], { encoding: 'utf8' })
  }
  let token = ''
  try {
    token = kestrelJson('token', 'create', '--name', 'job-list', '--read-only').token
  } catch {
    token = ''
  }
  log(`store: ${opts.jobs} jobs on 2 datasets written in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  const s = await startServer(opts, home, ['--web-dir', opts.dist])
  track(s.proc)
  const base = s.url
  const headers = token ? { Authorization: `Bearer ${token}` } : {}
  const api = async (url) => {
    const r = await fetch(`${base}${url}`, { headers })
    const doc = await r.json()
    if (!r.ok || !doc.ok) throw new Error(`${url}: ${JSON.stringify(doc).slice(0, 300)}`)
    return doc
  }
  const all = await api(listUrl(START, 1))
  if (all.total !== opts.jobs) throw new Error(`the store holds ${all.total} jobs, not ${opts.jobs}`)

  // ---- the route alone: each query the round below makes the page send ----
  const report = { jobs: opts.jobs, route: {}, page: {}, scroll: {} }
  const states = []
  let q = { ...START }
  for (const [label, , , change] of CHANGES) {
    q = { ...q, ...change }
    states.push({ label, q })
  }
  const routeAll = []
  for (const { label, q: st } of states) {
    const url = listUrl(st, 100)
    const ms = []
    let total = 0
    for (let i = 0; i < opts.runs; i++) {
      t0 = performance.now()
      total = (await api(url)).total
      ms.push(performance.now() - t0)
    }
    routeAll.push(...ms)
    report.route[label] = { url, total, median_ms: median(ms), max_ms: Math.max(...ms) }
    log(`GET ${url} (${total} jobs): ${fmt(ms)}`)
  }
  log(`GET /api/jobs, all queries: ${fmt(routeAll)}`)
  report.route.all = { median_ms: median(routeAll), max_ms: Math.max(...routeAll) }

  // ---- the page ----
  context = await launchBrowser(chromium, opts, path.join(tmp, 'profile'))
  const page = context.pages()[0] || (await context.newPage())
  if (token) await page.addInitScript((t) => localStorage.setItem('kestrel.token', t), token)
  await page.goto(`${base}/#/jobs`)
  const firstIds = (await api(listUrl(START, 3))).jobs.map((j) => j.id)
  await page.locator(`[data-testid="job-row-${firstIds[0]}"]`).waitFor({ timeout: 30000 })
  // In the page: from the click on an option (capture phase, before the
  // select handles it) to the first frame after the table holds `want` as
  // its first rows and is no longer busy; the timestamp is taken in a task
  // queued from that frame's requestAnimationFrame, i.e. after it painted.
  await page.evaluate(() => {
    window.__measure = (want) => {
      const table = document.querySelector('[data-testid="jobs-table"]')
      let t0 = null
      let sawBusy = false
      const mo = new MutationObserver(() => {
        if (table.getAttribute('aria-busy') === 'true') sawBusy = true
      })
      mo.observe(table, { attributes: true, attributeFilter: ['aria-busy'] })
      const onClick = (e) => {
        if (t0 === null && e.target.closest('.el-select-dropdown__item')) t0 = performance.now()
      }
      document.addEventListener('click', onClick, { capture: true })
      return new Promise((resolve) => {
        const check = () => {
          const ids = [...table.querySelectorAll('tbody tr[data-testid^="job-row-"]')].slice(0, want.length).map((tr) => Number(tr.dataset.testid.slice(8)))
          if (t0 !== null && sawBusy && table.getAttribute('aria-busy') === 'false' && ids.join() === want.join()) {
            mo.disconnect()
            document.removeEventListener('click', onClick, { capture: true })
            setTimeout(() => resolve({ ms: performance.now() - t0, domRows: table.querySelectorAll('tbody tr[data-testid^="job-row-"]').length }), 0)
          } else requestAnimationFrame(check)
        }
        requestAnimationFrame(check)
      })
    }
  })
  const byLabel = {}
  const pageAll = []
  let domRows = 0
  for (let run = 0; run < opts.runs; run++) {
    for (const { label, q: st } of states) {
      const want = (await api(listUrl(st, 3))).jobs.map((j) => j.id)
      const [, select, option] = CHANGES.find((c) => c[0] === label)
      await page.locator(`[data-testid="${select}"]`).click()
      await page.locator(`[data-testid="${option}"]`).waitFor({ state: 'visible', timeout: 10000 })
      await page.evaluate((w) => {
        window.__m = window.__measure(w)
      }, want)
      await page.locator(`[data-testid="${option}"]`).click()
      const m = await Promise.race([
        page.evaluate(() => window.__m),
        new Promise((_, reject) => setTimeout(() => reject(new Error(`${label}: the table never showed jobs ${want} (the route's first rows)`)), 20000)),
      ])
      ;(byLabel[label] ||= []).push(m.ms)
      pageAll.push(m.ms)
      domRows = Math.max(domRows, m.domRows)
      // The change closes the dropdown; let its transition end before the next one opens.
      await page.waitForTimeout(300)
    }
  }
  for (const [label, ms] of Object.entries(byLabel)) {
    report.page[label] = { median_ms: median(ms), max_ms: Math.max(...ms) }
    log(`page, ${label}: ${fmt(ms)}`)
  }
  report.page.all = { median_ms: median(pageAll), max_ms: Math.max(...pageAll), over_200ms: pageAll.filter((m) => m >= 200).length, n: pageAll.length }
  log(`page, filter/sort change -> new first rows shown, all changes: ${fmt(pageAll)}; ${report.page.all.over_200ms} of ${pageAll.length} at or over 200 ms`)

  // ---- virtual scrolling: scroll to the end of what is loaded, again and again ----
  const scrollMs = []
  for (let i = 0; i < opts.scrolls; i++) {
    const r = await page.evaluate(
      () =>
        new Promise((resolve) => {
          const el = document.querySelector('[data-testid="jobs-scroll"]')
          const rowsNow = () => document.querySelectorAll('[data-testid="jobs-table"] tbody tr[data-testid^="job-row-"]')
          const h0 = el.scrollHeight
          const t0 = performance.now()
          el.scrollTop = el.scrollHeight
          const check = () => {
            if (el.scrollHeight > h0) setTimeout(() => resolve({ ms: performance.now() - t0, dom: rowsNow().length }), 0)
            else if (performance.now() - t0 > 10000) resolve({ ms: -1, dom: rowsNow().length })
            else requestAnimationFrame(check)
          }
          requestAnimationFrame(check)
        }),
    )
    if (r.ms < 0) break
    scrollMs.push(r.ms)
    domRows = Math.max(domRows, r.dom)
  }
  const loaded = await page.evaluate(() => {
    const m = /\((\d+) loaded/.exec(document.querySelector('[data-testid="jobs-loaded"]')?.textContent || '')
    return m ? Number(m[1]) : null
  })
  const range = await page.locator('[data-testid="jobs-range"]').textContent()
  fs.mkdirSync(path.join(repo, 'build/bench/serve_load'), { recursive: true })
  await page.screenshot({ path: path.join(repo, 'build/bench/serve_load/job-list.png') })
  report.scroll = { scrolls: scrollMs.length, median_ms: median(scrollMs), max_ms: scrollMs.length ? Math.max(...scrollMs) : null, loaded, dom_rows_max: domRows, range }
  if (scrollMs.length) log(`scrolling to the end of the loaded rows, next page's rows in the DOM: ${fmt(scrollMs)}`)
  log(`after ${scrollMs.length} scrolls: ${loaded} jobs loaded, "${range}", at most ${domRows} job rows in the DOM`)
  if (opts.json) fs.writeFileSync(opts.json, JSON.stringify(report, null, 2))
  console.log(JSON.stringify(report))
}

main()
  .then(async () => {
    if (context) await context.close()
    process.exit(0)
  })
  .catch(async (e) => {
    console.error(`job-list: ${e.stack || e}`)
    if (context) await context.pages()[0]?.screenshot({ path: path.join(os.tmpdir(), 'job-list-error.png') }).catch(() => {})
    if (context) await context.close().catch(() => {})
    process.exit(e.message && e.message.includes('never showed') ? 1 : 2)
  })
