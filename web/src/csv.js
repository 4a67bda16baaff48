// Tables to CSV in the browser (RFC 4180: comma separated, CRLF line ends,
// a field with a comma, quote, CR or LF quoted with its quotes doubled) and
// the download of the text as a file.

function field(v) {
  if (v === null || v === undefined) return ''
  let s
  if (typeof v === 'number') s = Number.isFinite(v) ? String(v) : ''
  else s = String(v)
  // A cell that a spreadsheet would run as a formula gets a leading quote.
  if (/^[=+\-@\t\r]/.test(s) && typeof v !== 'number') s = `'${s}`
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
}

// columns: [{key, label}] (label defaults to key); rows: objects, or a
// function (row, key) => value as `get`.
export function toCsv(columns, rows, get = (row, key) => row[key]) {
  const lines = [columns.map((c) => field(c.label ?? c.key)).join(',')]
  for (const row of rows) lines.push(columns.map((c) => field(get(row, c.key))).join(','))
  return `${lines.join('\r\n')}\r\n`
}

// The per-class table of an evaluation record (record.metrics.classes).
export const CLASS_COLUMNS = [
  { key: 'class_id' },
  { key: 'name' },
  { key: 'images' },
  { key: 'instances' },
  { key: 'precision' },
  { key: 'recall' },
  { key: 'f1' },
  { key: 'map50' },
  { key: 'map50_95' },
]
export function classRowsCsv(classes) {
  return toCsv(CLASS_COLUMNS, classes, (row, key) => (key === 'map50_95' ? row.map50_95 ?? row.map5095 : row[key]))
}

// A comparison's per-class deltas (comparison.delta.classes: each metric
// {a, b, delta}, delta = B - A): one column per metric and side.
export function compareClassesCsv(classes, metrics = ['precision', 'recall', 'f1', 'map50', 'map5095']) {
  const columns = [{ key: 'class_id' }, { key: 'name' }, { key: 'instances' }]
  for (const m of metrics) for (const side of ['a', 'b', 'delta']) columns.push({ key: `${m}.${side}`, label: `${m === 'map5095' ? 'map50_95' : m}_${side}` })
  return toCsv(columns, classes, (row, key) => {
    const dot = key.indexOf('.')
    if (dot < 0) return row[key]
    const v = row[key.slice(0, dot)]
    return v && typeof v === 'object' ? v[key.slice(dot + 1)] : undefined
  })
}

// Saves `text` as a file through a temporary link (no server round trip).
export function downloadText(filename, text, type = 'text/csv;charset=utf-8') {
  const url = URL.createObjectURL(new Blob([text], { type }))
  const a = document.createElement('a')
  a.href = url
  a.download = filename
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 1000)
}
