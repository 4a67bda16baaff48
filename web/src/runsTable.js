// The Runs page's table (issue 33: a tracker's runs table) without Vue: the
// columns a user picks (a metric series' best or last value, a config key,
// or a built-in such as the duration), their cells from a GET /api/runs row,
// the sort (nulls last, pinned runs first), the grouping by a config key
// with each group's count and the mean and best of its numeric columns, and
// the view's state as URL text. tests/web/runs_table_logic.test.mjs runs it
// in node.

// Column ids: 'best:SERIES', 'last:SERIES', 'cfg:KEY', or a built-in.
export const BUILTINS = [
  { id: 'state', label: 'state' },
  { id: 'dataset', label: 'dataset' },
  { id: 'duration', label: 'duration (s)' },
  { id: 'created', label: 'submitted' },
  { id: 'tags', label: 'tags' },
]
export const DEFAULT_COLUMNS = ['best:metrics/mAP50-95(B)', 'best:metrics/mAP50(B)', 'last:train/box_loss', 'cfg:model', 'cfg:epochs', 'cfg:lr0', 'duration']

// Whether a lower value of a series is the better one: losses and wall
// time; every other series (mAP, precision, recall, ...) is better higher.
export function lowerIsBetter(series) {
  return /loss/i.test(series) || series === 'time' || series.endsWith('/time')
}

export function parseColumn(id) {
  const m = /^(best|last|cfg):(.+)$/.exec(id)
  if (m) return { id, kind: m[1], name: m[2] }
  return BUILTINS.some((b) => b.id === id) ? { id, kind: 'builtin', name: id } : null
}

export function columnLabel(id) {
  const c = parseColumn(id)
  if (!c) return id
  if (c.kind === 'builtin') return BUILTINS.find((b) => b.id === id).label
  if (c.kind === 'cfg') return c.name
  return `${c.name} (${c.kind})`
}

// A cell's value: a number, a string, or null (the run has none).
export function cellValue(run, id) {
  const c = parseColumn(id)
  if (!c || !run) return null
  if (c.kind === 'best' || c.kind === 'last') {
    const s = run.metrics?.[c.name]
    if (!s) return null
    const v = c.kind === 'last' ? s.last : lowerIsBetter(c.name) ? s.min : s.max
    return typeof v === 'number' && Number.isFinite(v) ? v : null
  }
  if (c.kind === 'cfg') {
    const v = run.config?.[c.name]
    if (v === undefined || v === null) return null
    return typeof v === 'number' || typeof v === 'string' ? v : JSON.stringify(v)
  }
  if (id === 'duration') return typeof run.duration_s === 'number' ? run.duration_s : null
  if (id === 'created') return typeof run.created_ms === 'number' ? run.created_ms : null
  if (id === 'tags') return Array.isArray(run.tags) && run.tags.length ? run.tags.join(', ') : null
  const v = run[id]
  return v === undefined || v === null || v === '' ? null : v
}

// Text of a cell for the table and the report.
export function fmtCell(v, id = '') {
  if (v === null || v === undefined) return '—'
  if (typeof v === 'number') {
    if (id === 'created') return new Date(v).toISOString().replace('T', ' ').slice(0, 16)
    if (Number.isInteger(v)) return String(v)
    return Math.abs(v) >= 1000 ? v.toFixed(0) : Number(v.toPrecision(4)).toString()
  }
  return String(v)
}

// Compares two cells; nulls after every value whatever the direction.
function compareCells(a, b, desc) {
  if (a === null && b === null) return 0
  if (a === null) return 1
  if (b === null) return -1
  let r
  if (typeof a === 'number' && typeof b === 'number') r = a - b
  else r = String(a).localeCompare(String(b), undefined, { numeric: true })
  return desc ? -r : r
}

// Runs sorted by `sort` ({ col, desc }, col '' = the server's order,
// newest first), the pinned ids first (in the same order among themselves).
export function sortRuns(runs, sort, pinned = []) {
  const pin = new Set(pinned.map(Number))
  const idx = new Map(runs.map((r, i) => [r.id, i]))
  return [...runs].sort((a, b) => {
    const pa = pin.has(a.id)
    const pb = pin.has(b.id)
    if (pa !== pb) return pa ? -1 : 1
    if (sort && sort.col) {
      const r = compareCells(cellValue(a, sort.col), cellValue(b, sort.col), sort.desc)
      if (r !== 0) return r
    }
    return idx.get(a.id) - idx.get(b.id)
  })
}

// The direction a column's "best" follows: 'low', 'high', or null (no best:
// a config key, a text column).
export function bestDirection(id) {
  const c = parseColumn(id)
  if (!c) return null
  if (c.kind === 'best' || c.kind === 'last') return lowerIsBetter(c.name) ? 'low' : 'high'
  if (id === 'duration') return 'low'
  return null
}

// Groups of `runs` (already sorted) by config key `key`: [{ value, label,
// runs, count, agg: { col: { mean, best, n } } }] in order of first
// appearance, for every numeric column of `columns` (best: by
// bestDirection; null when the column has none).
export function groupRuns(runs, key, columns) {
  const groups = new Map()
  for (const r of runs) {
    const v = cellValue(r, `cfg:${key}`)
    const k = v === null ? '\u0000none' : typeof v === 'number' ? `n:${v}` : `s:${v}`
    if (!groups.has(k)) groups.set(k, { value: v, label: v === null ? '(not set)' : fmtCell(v), runs: [] })
    groups.get(k).runs.push(r)
  }
  const out = []
  for (const g of groups.values()) {
    const agg = {}
    for (const col of columns) {
      const vals = g.runs.map((r) => cellValue(r, col)).filter((v) => typeof v === 'number')
      if (!vals.length) continue
      const dir = bestDirection(col)
      agg[col] = {
        n: vals.length,
        mean: vals.reduce((a, b) => a + b, 0) / vals.length,
        best: dir === 'low' ? Math.min(...vals) : dir === 'high' ? Math.max(...vals) : null,
      }
    }
    out.push({ ...g, count: g.runs.length, agg })
  }
  return out
}

// Every column a user may pick from a /api/runs document: each series'
// best and last, each config key, the built-ins.
export function columnChoices(doc) {
  const series = doc?.series || []
  const keys = doc?.keys || []
  return [
    { label: 'Metrics (best)', options: series.map((s) => ({ id: `best:${s}`, label: columnLabel(`best:${s}`) })) },
    { label: 'Metrics (last)', options: series.map((s) => ({ id: `last:${s}`, label: columnLabel(`last:${s}`) })) },
    { label: 'Config', options: keys.map((k) => ({ id: `cfg:${k}`, label: k })) },
    { label: 'Run', options: BUILTINS.map((b) => ({ id: b.id, label: b.label })) },
  ]
}

// The view as URL / storage text and back: columns joined by '|' (series
// names hold commas and parentheses, never '|'), the sort as 'COL:asc|desc'.
export function encodeColumns(cols) {
  return cols.join('|')
}
export function decodeColumns(text) {
  if (typeof text !== 'string' || !text) return null
  const cols = text.split('|').filter((c) => parseColumn(c))
  return cols.length ? cols : null
}
export function encodeSort(sort) {
  return sort && sort.col ? `${sort.col}:${sort.desc ? 'desc' : 'asc'}` : ''
}
export function decodeSort(text) {
  const m = /^(.+):(asc|desc)$/.exec(text || '')
  return m && parseColumn(m[1]) ? { col: m[1], desc: m[2] === 'desc' } : { col: '', desc: false }
}
export function decodeIds(text) {
  return String(text || '')
    .split(',')
    .filter((s) => /^[1-9][0-9]{0,15}$/.test(s))
    .map(Number)
}
