// The Studies pages' data shaping (docs/server.md "Studies"): plain
// functions of a study's show document, so tests/web/studies.test.mjs checks
// them without a browser. The pages only draw what these return.

export const TRIAL_STATES = ['queued', 'running', 'succeeded', 'pruned', 'failed', 'infra_failed']

export function trialTagType(state) {
  return (
    {
      queued: 'info',
      running: 'primary',
      succeeded: 'success',
      pruned: 'warning',
      failed: 'danger',
      infra_failed: 'info',
    }[state] || 'info'
  )
}

export function studyTagType(state) {
  return { running: 'primary', stopping: 'warning', stopped: 'info', finished: 'success' }[state] || 'info'
}

const isNum = (v) => typeof v === 'number' && Number.isFinite(v)
const maximizing = (study) => ((study && study.settings && study.settings.direction) || 'maximize') !== 'minimize'

// [[trial number, best value so far]] over the succeeded trials in number
// order: the running max (min when minimizing).
export function bestSoFar(trials, maximize = true) {
  const done = trials.filter((t) => t.state === 'succeeded' && isNum(t.value)).sort((a, b) => a.number - b.number)
  const out = []
  let best = null
  for (const t of done) {
    if (best === null || (maximize ? t.value > best : t.value < best)) best = t.value
    out.push([t.number, best])
  }
  return out
}

// A pruned trial's curve ends at the rung it was stopped at (pruned_at
// epochs), even when its job reported an epoch more; the others' curves are
// what they reported.
export function trialCurve(t) {
  const values = Array.isArray(t.intermediate) ? t.intermediate : []
  const end = t.state === 'pruned' && isNum(t.pruned_at) ? Math.min(values.length, t.pruned_at) : values.length
  return values.slice(0, end).map((v, i) => [i + 1, v])
}

// The space's sampled params in order: [{key, kind, log, choices}].
export function spaceParams(doc) {
  const ps = (doc && doc.space && doc.space.params) || []
  return ps.map((p) => ({ key: p.key, kind: p.kind, log: !!p.log, choices: p.choices || null }))
}

export function historyOption(doc) {
  const trials = doc.trials || []
  const metric = (doc.study && doc.study.settings && doc.study.settings.metric) || 'fitness'
  const maximize = maximizing(doc.study)
  const points = trials
    .filter((t) => t.state === 'succeeded' && isNum(t.value))
    .map((t) => ({ value: [t.number, t.value], jobId: t.job_id }))
  const best = bestSoFar(trials, maximize)
  return {
    animation: false,
    grid: { left: 60, right: 20, top: 36, bottom: 40 },
    legend: { top: 0 },
    tooltip: { trigger: 'item' },
    xAxis: { type: 'value', name: 'trial', nameLocation: 'middle', nameGap: 26, minInterval: 1 },
    yAxis: { type: 'value', name: metric, scale: true },
    series: [
      { name: metric, type: 'scatter', symbolSize: 9, data: points, itemStyle: { color: '#1f77b4' } },
      { name: 'best so far', type: 'line', step: 'end', showSymbol: false, data: best, lineStyle: { width: 2, color: '#d62728' }, itemStyle: { color: '#d62728' } },
    ],
  }
}

export function parallelOption(doc) {
  const params = spaceParams(doc)
  const metric = (doc.study && doc.study.settings && doc.study.settings.metric) || 'fitness'
  const done = (doc.trials || []).filter((t) => t.state === 'succeeded' && isNum(t.value))
  const axes = params.map((p, i) => {
    if (p.kind === 'categorical') return { dim: i, name: p.key, type: 'category', data: p.choices || [] }
    return { dim: i, name: p.key, type: p.log ? 'log' : 'value', scale: true }
  })
  axes.push({ dim: params.length, name: metric, type: 'value', scale: true, nameTextStyle: { fontWeight: 'bold' } })
  const values = done.map((t) => t.value)
  const lo = values.length ? Math.min(...values) : 0
  const hi = values.length ? Math.max(...values) : 1
  return {
    animation: false,
    parallel: { left: 50, right: 70, top: 40, bottom: 30 },
    parallelAxis: axes,
    visualMap: {
      type: 'continuous',
      dimension: params.length,
      min: lo,
      max: hi > lo ? hi : lo + 1,
      inRange: { color: maximizing(doc.study) ? ['#c6dbef', '#08306b'] : ['#08306b', '#c6dbef'] },
      right: 0,
      top: 'middle',
      calculable: false,
      itemHeight: 120,
    },
    series: [
      {
        type: 'parallel',
        lineStyle: { width: 1.5, opacity: 0.8 },
        data: done.map((t) => ({
          name: `trial ${t.number}`,
          value: [...params.map((p) => (t.params || {})[p.key]), t.value],
        })),
      },
    ],
  }
}

// Every trial's per-epoch curve; pruned trials dashed and ending at their rung.
export function curvesOption(doc) {
  const metric = (doc.study && doc.study.settings && doc.study.settings.metric) || 'fitness'
  const series = (doc.trials || [])
    .filter((t) => Array.isArray(t.intermediate) && t.intermediate.length > 0)
    .map((t) => ({
      name: `trial ${t.number}`,
      type: 'line',
      showSymbol: true,
      symbolSize: 5,
      data: trialCurve(t),
      lineStyle: { width: t.state === 'pruned' ? 1 : 2, type: t.state === 'pruned' ? 'dashed' : 'solid' },
      endLabel: { show: t.state === 'pruned', formatter: 'pruned' },
    }))
  return {
    animation: false,
    grid: { left: 60, right: 60, top: 20, bottom: 40 },
    tooltip: { trigger: 'item' },
    xAxis: { type: 'value', name: 'epoch', nameLocation: 'middle', nameGap: 26, minInterval: 1, min: 1 },
    yAxis: { type: 'value', name: metric, scale: true },
    series,
  }
}

// A param's value as the table shows it: choices as text, numbers to 4
// significant digits.
export function fmtParam(v) {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : Number(v.toPrecision(4)).toString()
  return v === undefined || v === null ? '—' : String(v)
}
