// Shared by the evaluation and compare pages: the dataset image route of an
// evaluation's image, the evaluation routes' images as the box viewer's
// items, and the curve and confusion chart options.
import { className } from './boxes.js'

// NAME@vN of an evaluation summary ({dataset, version}: "v3" or 3).
export function datasetSpec(ev) {
  if (!ev) return ''
  const v = String(ev.version ?? '')
  return `${ev.dataset}@${/^v/.test(v) ? v : `v${v}`}`
}

export function imageSrc(spec, sha) {
  return `/api/datasets/${encodeURIComponent(spec)}/images/${sha}`
}

// An evaluation route's image ({sha, path, width, height, labels:
// [{class_id, box}]}) as the box viewer's image: normalised label boxes,
// in the order of `labels` (the viewer's matching relies on it).
export function viewerImage(img, split = '') {
  const w = Math.max(1, img.width || 1)
  const h = Math.max(1, img.height || 1)
  return {
    sha: img.sha,
    path: img.path,
    split,
    width: img.width,
    height: img.height,
    labels: img.labels || [],
    boxes: (img.labels || []).map((l) => ({
      cls: l.class_id,
      cx: (l.box[0] + l.box[2]) / 2 / w,
      cy: (l.box[1] + l.box[3]) / 2 / h,
      w: (l.box[2] - l.box[0]) / w,
      h: (l.box[3] - l.box[1]) / h,
    })),
  }
}

// The class names of an evaluation detail ({record: {settings.class_names,
// metrics.classes}}).
export function classNames(detail) {
  const rec = detail?.record
  const names = rec?.settings?.class_names
  if (Array.isArray(names) && names.length) return names
  return (rec?.metrics?.classes || []).map((c) => c.name)
}

const pairs = (xs, ys) => (xs || []).map((x, i) => [x, ys?.[i]]).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y))

// Curves of one or more runs overlaid: runs = [{name, curves}] with curves
// {confidence, precision, recall, f1, pr: {recall, precision}}; which: 'pr' | 'f1'.
export function curveOption(runs, which) {
  const pr = which === 'pr'
  return {
    animation: false,
    tooltip: { trigger: 'axis', valueFormatter: (v) => (typeof v === 'number' ? v.toFixed(3) : v) },
    legend: { top: 0 },
    grid: { left: 48, right: 16, top: 36, bottom: 40 },
    xAxis: { type: 'value', min: 0, max: 1, name: pr ? 'recall' : 'confidence', nameLocation: 'middle', nameGap: 24 },
    yAxis: { type: 'value', min: 0, max: 1, name: pr ? 'precision' : 'F1' },
    series: runs
      .filter((r) => r.curves)
      .map((r) => ({
        name: r.name,
        type: 'line',
        showSymbol: false,
        data: pr ? pairs(r.curves.pr?.recall, r.curves.pr?.precision) : pairs(r.curves.confidence, r.curves.f1),
      })),
  }
}

// matrix[pred][gt] ((nc+1) x (nc+1), index nc = background) as heatmap
// items [gt, pred, value]; normalised: each column (true class) divided by its sum.
export function confusionCells(confusion, normalized) {
  const m = confusion?.matrix || []
  const n = m.length
  const colSum = Array.from({ length: n }, (_, g) => m.reduce((s, row) => s + (row[g] || 0), 0))
  const cells = []
  for (let p = 0; p < n; p++)
    for (let g = 0; g < n; g++) {
      const count = m[p][g] || 0
      const value = normalized ? (colSum[g] > 0 ? count / colSum[g] : 0) : count
      cells.push({ value: [g, p, value], count })
    }
  return cells
}

export function confusionLabels(names, confusion) {
  const nc = confusion?.nc ?? names.length
  return [...Array.from({ length: nc }, (_, i) => className(names, i)), 'background']
}

export const pct = (x) => (typeof x === 'number' ? `${(100 * x).toFixed(1)} %` : '—')
export function signed(x, digits = 3) {
  if (typeof x !== 'number' || Number.isNaN(x)) return '—'
  return `${x > 0 ? '+' : x < 0 ? '−' : '±'}${Math.abs(x).toFixed(digits)}`
}
