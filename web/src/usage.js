// The System page's per-worker usage charts (docs/server.md "System",
// docs/jobs.md "System usage"): each worker's latest usage sample comes with
// GET /api/workers ("usage": the sum over its running trainers, sampled
// every --usage-s by the worker); the page polls that route every 2 s and
// keeps a rolling window of the samples it saw here, in the browser. A
// reload starts the window afresh; the job page's sys/ panels hold a job's
// whole history.
import { sig4 } from './chartGroups.js'

export const KEEP_MS = 15 * 60 * 1000 // the window each worker keeps

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null)

// Adds the workers document's new samples to `history` ({ [worker id]:
// [[sampled_ms, cpu %, rss MB, gpu util % | null, gpu MB | null], ...] },
// oldest first) and returns it. A sample older than the window's newest is
// skipped (each poll repeats the latest until the next one), and so is one
// that was already old when first seen (a stopped worker's last sample, or
// one from before this page opened by more than 3 intervals): the window
// holds only what was measured while the page looked.
export function appendUsage(history, doc, keepMs = KEEP_MS) {
  const now = num(doc?.now_ms)
  for (const w of doc?.workers || []) {
    const u = w && w.usage
    if (!u || typeof u !== 'object' || num(u.sampled_ms) === null) continue
    const list = history[w.id] || []
    if (list.length && list[list.length - 1][0] >= u.sampled_ms) continue
    const fresh = Math.max(3 * (num(u.interval_ms) || 5000), 30000)
    if (!list.length && now !== null && now - u.sampled_ms > fresh) continue
    list.push([u.sampled_ms, num(u.cpu_percent), num(u.rss_mb), num(u.gpu_util), num(u.gpu_mem_mb)])
    while (list.length && list[0][0] < u.sampled_ms - keepMs) list.shift()
    history[w.id] = list
  }
  return history
}

// The columns of a history row.
export const FIELDS = {
  cpu: { index: 1, title: 'CPU of the running trainers (%; 100 = one core)', unit: '%' },
  rss: { index: 2, title: 'Memory of the running trainers (RSS, MB)', unit: 'MB' },
  gpuUtil: { index: 3, title: 'GPU utilisation (%)', unit: '%' },
  gpuMem: { index: 4, title: 'GPU memory of the running trainers (MB)', unit: 'MB' },
}

// Whether any worker's window has a value of `field` (the GPU charts only
// show when a GPU reading exists).
export function hasField(history, field) {
  const i = FIELDS[field].index
  return Object.values(history).some((rows) => rows.some((r) => r[i] !== null))
}

// An ECharts option: one line per worker over wall-clock time.
export function usageOption(history, field) {
  const { index, unit } = FIELDS[field]
  const series = Object.keys(history)
    .sort()
    .map((id) => ({
      id,
      name: id,
      type: 'line',
      showSymbol: history[id].length < 40,
      data: history[id].filter((r) => r[index] !== null).map((r) => [r[0], r[index]]),
    }))
    .filter((s) => s.data.length > 0)
  return {
    animation: false,
    tooltip: { trigger: 'axis', confine: true, valueFormatter: (v) => `${sig4(v)} ${unit}` },
    legend: { type: 'plain', top: 0, left: 8, right: 8 },
    grid: { left: 56, right: 16, top: 32, bottom: 28 },
    xAxis: { type: 'time' },
    // The unit is in the card's title (an axis name here sat under the legend).
    yAxis: { type: 'value', min: 0, axisLabel: { formatter: (v) => sig4(v) } },
    series,
  }
}

// A worker's latest sample as a line: "CPU 97.5 % · RSS 312 MB · GPU 40 %, 1204 MB".
export function usageText(u) {
  if (!u || typeof u !== 'object' || num(u.cpu_percent) === null) return ''
  let t = `CPU ${sig4(u.cpu_percent)} % · RSS ${sig4(num(u.rss_mb) ?? 0)} MB`
  const util = num(u.gpu_util)
  const mem = num(u.gpu_mem_mb)
  if (util !== null || mem !== null)
    t += ` · GPU${util !== null ? ` ${sig4(util)} %` : ''}${util !== null && mem !== null ? ',' : ''}${mem !== null ? ` ${sig4(mem)} MB` : ''}`
  return t
}
