// The Report page's tables and its "Save as HTML" file, without Vue: the
// config comparison (every key of the runs' configs, the keys whose values
// differ marked), the summary table (each chosen series' best per run, the
// best run's cell marked), and one self-contained HTML document: the charts
// as PNG data URLs, the tables as HTML, an inline style and a
// Content-Security-Policy that allows nothing from outside (no script, no
// request), so the file opened offline shows everything.
// tests/web/runs_table_logic.test.mjs runs it in node.
import { cellValue, columnLabel, fmtCell, lowerIsBetter } from './runsTable.js'

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])
}

const cfgText = (v) => (v === undefined ? '—' : v === null ? 'null' : typeof v === 'object' ? JSON.stringify(v) : String(v))

// { keys: [{ key, values: [text per run], differs }] }, keys sorted, the
// differing ones first when `differingFirst`.
export function configComparison(runs, differingFirst = true) {
  const keys = new Set()
  for (const r of runs) for (const k of Object.keys(r.config || {})) keys.add(k)
  const rows = [...keys].sort().map((key) => {
    const values = runs.map((r) => cfgText(r.config?.[key]))
    return { key, values, differs: new Set(values).size > 1 }
  })
  if (differingFirst) rows.sort((a, b) => Number(b.differs) - Number(a.differs))
  return rows
}

// Series worth a summary column: validation metrics and losses, with the
// series the runs have.
export function summarySeries(runs) {
  const names = new Set()
  for (const r of runs) for (const n of Object.keys(r.metrics || {})) names.add(n)
  return [...names].filter((n) => /^(metrics|train|val)\//.test(n)).sort((a, b) => Number(b.startsWith('metrics/')) - Number(a.startsWith('metrics/')) || a.localeCompare(b))
}

// { columns: [id], rows: [{ run, cells: [{ value, text, best }] }] }: the
// best value of each column among the runs marked.
export function summaryTable(runs, series) {
  const columns = series.map((s) => `best:${s}`)
  const bestOf = columns.map((c, i) => {
    const vals = runs.map((r) => cellValue(r, c)).filter((v) => typeof v === 'number')
    if (!vals.length) return null
    return lowerIsBetter(series[i]) ? Math.min(...vals) : Math.max(...vals)
  })
  const rows = runs.map((run) => ({
    run,
    cells: columns.map((c, i) => {
      const value = cellValue(run, c)
      return { value, text: fmtCell(value, c), best: value !== null && value === bestOf[i] && runs.length > 1 }
    }),
  }))
  return { columns, rows }
}

const runLabel = (r) => `#${r.id} ${r.name || ''}`.trim()

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}.muted{color:#666}
.note{white-space:pre-wrap;border-left:3px solid #c0c4cc;padding:4px 10px;margin:12px 0}
.charts{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;flex:1 1 calc(50% - 12px);min-width:320px;border:1px solid #e4e7ed;padding:8px;box-sizing:border-box}
figure img{width:100%;height:auto;display:block}figcaption{font-weight:600;margin-bottom:6px}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #e4e7ed;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f7fa}td.num{text-align:right;font-variant-numeric:tabular-nums}td.best{font-weight:700;background:#f0f9eb}
tr.differs td,tr.differs th{background:#fdf6ec}`

// The whole document. charts: [{ title, dataUrl }] (data:image/png;base64);
// runs: /api/runs rows; created: a date text.
export function buildReportHtml({ title, note, created, runs, charts, series }) {
  const t = escapeHtml(title || 'Kestrel report')
  const summary = summaryTable(runs, series || summarySeries(runs))
  const config = configComparison(runs)
  const out = []
  out.push('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">')
  out.push(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">`)
  out.push(`<meta name="viewport" content="width=device-width, initial-scale=1"><title>${t}</title><style>${STYLE}</style></head><body>`)
  out.push(`<h1 id="report-title">${t}</h1>`)
  out.push(`<p class="muted">Kestrel report, ${escapeHtml(created || '')}: ${runs.length} run${runs.length === 1 ? '' : 's'}: ${runs.map((r) => escapeHtml(runLabel(r))).join(', ')}</p>`)
  if (note) out.push(`<div class="note" id="report-note">${escapeHtml(note)}</div>`)
  out.push('<h2>Charts</h2><div class="charts" id="report-charts">')
  for (const c of charts) {
    const src = /^data:image\/(png|jpeg|svg\+xml)[;,]/.test(c.dataUrl || '') ? c.dataUrl : ''
    out.push(`<figure><figcaption>${escapeHtml(c.title)}</figcaption><img alt="${escapeHtml(c.title)}" src="${escapeHtml(src)}"></figure>`)
  }
  out.push('</div>')
  out.push('<h2>Summary</h2><table id="report-summary"><thead><tr><th scope="col">run</th>')
  for (const c of summary.columns) out.push(`<th scope="col">${escapeHtml(columnLabel(c))}</th>`)
  out.push('</tr></thead><tbody>')
  for (const row of summary.rows) {
    out.push(`<tr><th scope="row">${escapeHtml(runLabel(row.run))}</th>`)
    for (const cell of row.cells) out.push(`<td class="num${cell.best ? ' best' : ''}">${escapeHtml(cell.text)}</td>`)
    out.push('</tr>')
  }
  out.push('</tbody></table>')
  out.push(`<h2>Config</h2><p class="muted">${config.filter((r) => r.differs).length} of ${config.length} keys differ (highlighted, first).</p>`)
  out.push('<table id="report-config"><thead><tr><th scope="col">key</th>')
  for (const r of runs) out.push(`<th scope="col">${escapeHtml(runLabel(r))}</th>`)
  out.push('</tr></thead><tbody>')
  for (const row of config) {
    out.push(`<tr${row.differs ? ' class="differs"' : ''}><th scope="row">${escapeHtml(row.key)}</th>`)
    for (const v of row.values) out.push(`<td>${escapeHtml(v)}</td>`)
    out.push('</tr>')
  }
  out.push('</tbody></table></body></html>\n')
  return out.join('')
}

// A file name from the title: letters, digits, '-' and '_' kept.
export function reportFileName(title) {
  const stem = String(title || 'report')
    .replace(/[^A-Za-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 80)
  return `${stem || 'report'}.html`
}
