// The job page's chart panels, built from whatever series the metrics route
// lists (GET /api/jobs/{id}/metrics): one panel per (x axis, name prefix):
// "train/box_loss" -> the epoch panel "train", "lr/pg0" -> "lr",
// "iter/box_loss" -> the step panel "iter", "sys/cpu_percent" -> the time
// panel "sys-util" (the worker's usage samples), a name without "/" ("time",
// "fitness") its own panel. A new scalar a trainer logs gets a panel with no
// change here; the known prefixes only get a title and a place in the order.

// key: the panel's data-testid stem (the browser tests and tools/chart-paint.mjs read them).
// `names`: only the series whose name after the prefix matches (the worker's
// usage samples, x = wall seconds of the attempt, split by unit: percentages
// in one panel, megabytes in another; docs/jobs.md "System usage").
const KNOWN = [
  { prefix: 'metrics', axis: 'epoch', key: 'map', title: 'Validation metrics (mAP, precision, recall)' },
  { prefix: 'train', axis: 'epoch', key: 'loss', title: 'Train losses per epoch' },
  { prefix: 'val', axis: 'epoch', key: 'val', title: 'Validation losses per epoch' },
  { prefix: 'lr', axis: 'epoch', key: 'lr', title: 'Learning rate per parameter group' },
  { prefix: 'iter', axis: 'step', key: 'iter', title: 'Iteration losses' },
  { prefix: 'time', axis: 'epoch', key: 'time', title: 'Wall time (s) at each epoch end' },
  { prefix: 'sys', axis: 'time', key: 'sys-util', title: 'System: trainer CPU and GPU utilisation (%; 100 = one core)', names: /(_percent|_util)$/ },
  { prefix: 'sys', axis: 'time', key: 'sys-mem', title: 'System: trainer memory (MB: RSS, GPU)', names: /_mb$/ },
]

export function prefixOf(name) {
  const i = name.indexOf('/')
  return i > 0 ? name.slice(0, i) : name
}

// The panel a series goes to: { key, title, axis, prefix, order }.
export function groupOf(name, axis) {
  const prefix = prefixOf(name)
  const rest = shortName(name)
  const i = KNOWN.findIndex((k) => k.prefix === prefix && k.axis === axis && (!k.names || k.names.test(rest)))
  if (i >= 0) return { ...KNOWN[i], order: i }
  const key = `${axis}-${prefix.replace(/[^A-Za-z0-9_-]+/g, '_')}`
  return { prefix, axis, key, title: `${prefix} per ${axis}`, order: KNOWN.length }
}

// The panels of a set of series ([{ name, axis }]), in display order.
export function groupsOf(series) {
  const byKey = new Map()
  for (const s of series) {
    const g = groupOf(s.name, s.axis)
    if (!byKey.has(g.key)) byKey.set(g.key, g)
  }
  return [...byKey.values()].sort((a, b) => a.order - b.order || a.key.localeCompare(b.key))
}

// A series' legend label within its panel: the name without the panel's prefix.
export function shortName(name) {
  const i = name.indexOf('/')
  return i > 0 ? name.slice(i + 1) : name
}

// Iterations per epoch of a run: from its newest progress (iterations /
// epochs), else from its series' ends (last step / last epoch); 0 unknown.
export function itersPerEpoch(progress, series) {
  if (progress && progress.iterations > 0 && progress.epochs > 0) return progress.iterations / progress.epochs
  let step = 0
  let epoch = 0
  for (const s of Object.values(series || {})) {
    const last = s.overview.length ? s.overview[s.overview.length - 1][0] : 0
    if (s.axis === 'step') step = Math.max(step, last)
    if (s.axis === 'epoch') epoch = Math.max(epoch, last)
  }
  return step > 0 && epoch > 0 ? step / epoch : 0
}

// A series' points on another x axis: 'epoch', 'step' or 'time' (the run's
// wall seconds: its "time" series, which is each epoch end's; a step between
// two epoch ends is placed linearly between them). A 'time' series (usage
// samples: wall seconds) goes to epochs the other way round, linearly
// between epoch ends, and to steps from there. Points that cannot be
// placed (no iterations per epoch, no time for that epoch, a time past the
// last epoch end) are dropped.
// `axis` is the series' own; `ipe` iterations per epoch; `time` the run's
// [[epoch, seconds]] (or null).
export function convertX(points, axis, target, ipe, time) {
  if (target === axis) return points
  if (axis === 'time') {
    const ends = [[0, 0], ...(time || [])] // [epoch, seconds], in order
    const epochAt = (t) => {
      for (let i = 1; i < ends.length; i++) {
        const [e0, t0] = ends[i - 1]
        const [e1, t1] = ends[i]
        if (t >= t0 && t <= t1) return t1 > t0 ? e0 + ((e1 - e0) * (t - t0)) / (t1 - t0) : e1
      }
      return undefined
    }
    const out = []
    for (const [x, y] of points) {
      const e = epochAt(x)
      const nx = e === undefined ? undefined : target === 'epoch' ? e : ipe > 0 ? e * ipe : undefined
      if (nx !== undefined && Number.isFinite(nx)) out.push([nx, y])
    }
    return out
  }
  const timeAt = new Map((time || []).map(([e, t]) => [e, t]))
  const epochTime = (e) => {
    if (timeAt.has(e)) return timeAt.get(e)
    const lo = Math.floor(e)
    const t0 = lo === 0 ? 0 : timeAt.get(lo)
    const t1 = timeAt.get(lo + 1)
    if (t0 === undefined || t1 === undefined) return undefined
    return t0 + (t1 - t0) * (e - lo)
  }
  const out = []
  for (const [x, y] of points) {
    let nx
    if (target === 'step') nx = ipe > 0 ? x * ipe : undefined
    else if (target === 'epoch') nx = ipe > 0 ? x / ipe : undefined
    else nx = epochTime(axis === 'step' ? (ipe > 0 ? x / ipe : NaN) : x)
    if (nx !== undefined && Number.isFinite(nx)) out.push([nx, y])
  }
  return out
}

// 4 significant digits, as a tooltip shows a value (0.0001234, 12.35, 1235).
export function sig4(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return v === null || v === undefined ? '—' : String(v)
  return String(Number(v.toPrecision(4)))
}

// A line style per metric of a panel, when colour tells runs apart.
export const DASHES = ['solid', 'dashed', 'dotted', [10, 4, 2, 4], [2, 6], [14, 4]]
