// Chart options for a dataset version's box statistics (the "box_stats" of
// GET /api/datasets/{name}, docs/server.md) and its image-size histogram:
// what the reference framework's labels.jpg shows, as ECharts options.
// Pure functions of the documents, so tests/web/box_stats.test.mjs checks
// them without a browser.

const RAMP = ['#f4f7fb', '#c6dbef', '#6baed6', '#2171b5', '#08306b']

// 0.05 -> "0.05": a bin's lower edge as an axis label.
const edge = (i, bins) => String(Math.round((i / bins) * 100) / 100)

// Two significant digits: 0.125 -> "0.13", 5.656 -> "5.7", 8 -> "8".
export function ratioText(r) {
  return String(Number(r.toPrecision(2)))
}

// A [bins][bins] count matrix (row = y bin, column = x bin) as heatmap
// cells [x, y, count], the empty cells left out.
export function densityCells(matrix) {
  const cells = []
  matrix.forEach((row, y) => row.forEach((n, x) => n > 0 && cells.push([x, y, n])))
  return cells
}

// A 2-D density over [0, 1]²: box centres (y down, as in the image) or box
// sizes (h up, as labels.jpg).
export function densityOption(matrix, bins, { xName, yName, yDown }) {
  const cells = densityCells(matrix)
  const max = cells.reduce((m, c) => Math.max(m, c[2]), 0)
  const labels = Array.from({ length: bins }, (_, i) => edge(i, bins))
  const every = Math.max(1, Math.round(bins / 4))
  const axis = (name, extra) => ({
    type: 'category',
    name,
    nameLocation: 'middle',
    nameGap: 28,
    data: labels,
    splitArea: { show: false },
    axisLabel: { interval: (i) => i % every === 0 },
    ...extra,
  })
  const step = 1 / bins
  return {
    tooltip: {
      position: 'top',
      formatter: (p) => {
        const [x, y, n] = p.data
        const r = (i) => `${(i * step).toFixed(2)}–${((i + 1) * step).toFixed(2)}`
        return `${xName} ${r(x)}, ${yName} ${r(y)}: ${n} box${n === 1 ? '' : 'es'}`
      },
    },
    grid: { left: 56, right: 16, top: 16, bottom: 44 },
    xAxis: axis(xName),
    yAxis: axis(yName, { inverse: !!yDown, nameGap: 36 }),
    visualMap: { min: 0, max: Math.max(1, max), show: false, inRange: { color: RAMP } },
    series: [{ type: 'heatmap', data: cells, progressive: 0 }],
  }
}

// The aspect ratio histogram: bins between log-spaced edges; the end bins
// also hold the ratios past them.
export function aspectOption(aspect) {
  const { edges, counts } = aspect
  const n = counts.length
  const names = counts.map((_, i) => {
    if (i === 0) return `< ${ratioText(edges[1])}`
    if (i === n - 1) return `≥ ${ratioText(edges[n - 1])}`
    return `${ratioText(edges[i])}–${ratioText(edges[i + 1])}`
  })
  return {
    tooltip: { trigger: 'axis' },
    grid: { left: 48, right: 16, top: 24, bottom: 64 },
    xAxis: { type: 'category', data: names, name: 'width / height (pixels)', nameLocation: 'middle', nameGap: 48, axisLabel: { interval: 0, rotate: 40 } },
    yAxis: { type: 'value', name: 'boxes', minInterval: 1 },
    series: [{ type: 'bar', data: counts, itemStyle: { color: '#7a9cc6' } }],
  }
}

// Normalized width and height histograms side by side.
export function sideOption(stats) {
  const labels = Array.from({ length: stats.bins }, (_, i) => edge(i, stats.bins))
  return {
    tooltip: { trigger: 'axis' },
    legend: { top: 0 },
    grid: { left: 48, right: 16, top: 32, bottom: 44 },
    xAxis: { type: 'category', data: labels, name: 'fraction of the image', nameLocation: 'middle', nameGap: 28 },
    yAxis: { type: 'value', name: 'boxes', minInterval: 1 },
    series: [
      { name: 'width', type: 'bar', data: stats.width, itemStyle: { color: '#4363d8' } },
      { name: 'height', type: 'bar', data: stats.height, itemStyle: { color: '#f58231' } },
    ],
  }
}

// Images by number of boxes: 0, 1, …, the last bin "N+" when it is open.
export function boxesPerImageOption(bpi) {
  const n = bpi.counts.length
  const names = bpi.counts.map((_, i) => (bpi.last_open && i === n - 1 ? `${i}+` : String(i)))
  return {
    tooltip: { trigger: 'axis' },
    grid: { left: 48, right: 16, top: 24, bottom: 40 },
    xAxis: { type: 'category', data: names, name: 'boxes', nameLocation: 'middle', nameGap: 26 },
    yAxis: { type: 'value', name: 'images', minInterval: 1 },
    series: [{ type: 'bar', data: bpi.counts, itemStyle: { color: '#7a9cc6' } }],
  }
}

// The summary's image-size histogram ([{max_side, images}]).
export function imageSizeOption(rows) {
  return {
    tooltip: { trigger: 'axis' },
    grid: { left: 48, right: 16, top: 24, bottom: 40 },
    xAxis: { type: 'category', data: rows.map((r) => r.max_side), name: 'longest side (px)', nameLocation: 'middle', nameGap: 26 },
    yAxis: { type: 'value', name: 'images', minInterval: 1 },
    series: [{ type: 'bar', data: rows.map((r) => r.images), itemStyle: { color: '#3cb44b' } }],
  }
}
