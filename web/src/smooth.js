// Smoothing of a training curve as TensorBoard's scalar dashboard does it:
// an exponential moving average, debiased so the first points are not
// pulled towards 0. `weight` in [0, 1): 0 leaves the curve as it is.
// `data` is [[x, y], ...] in x order; a non-finite y passes through and
// does not enter the average. Returns a new array.
export function smoothEma(data, weight) {
  const w = Math.min(Math.max(Number(weight) || 0, 0), 0.999)
  if (w === 0) return data.map(([x, y]) => [x, y])
  let last = 0
  let n = 0
  return data.map(([x, y]) => {
    if (!Number.isFinite(y)) return [x, y]
    last = last * w + (1 - w) * y
    n++
    return [x, last / (1 - Math.pow(w, n))]
  })
}

// A trailing running mean over the last `window` finite points (W&B's
// "running average"): point i is the mean of the finite y among points
// max(0, i - window + 1)..i. `window` >= 1 (1 leaves the curve as it is).
// Non-finite y pass through and are not averaged in. Returns a new array.
export function smoothRunningMean(data, window) {
  const k = Math.max(1, Math.floor(Number(window) || 1))
  const out = []
  const recent = [] // the finite y of the last k points, oldest first
  let sum = 0
  for (const [x, y] of data) {
    if (!Number.isFinite(y)) {
      out.push([x, y])
      continue
    }
    recent.push(y)
    sum += y
    if (recent.length > k) sum -= recent.shift()
    out.push([x, sum / recent.length])
  }
  return out
}

// A Gaussian kernel over the points' order (not their x distance): point i
// is the weighted mean of the finite y at i - r..i + r, weights
// exp(-d^2 / (2 sigma^2)), r = ceil(3 sigma), renormalised over the points
// that exist (so the ends are not pulled towards 0). `sigma` in points;
// <= 0 leaves the curve as it is. Non-finite y pass through and are not
// averaged in. Returns a new array.
export function smoothGaussian(data, sigma) {
  const sd = Number(sigma) || 0
  if (!(sd > 0)) return data.map(([x, y]) => [x, y])
  const r = Math.ceil(3 * sd)
  const kernel = []
  for (let d = 0; d <= r; d++) kernel.push(Math.exp(-(d * d) / (2 * sd * sd)))
  return data.map(([x, y], i) => {
    if (!Number.isFinite(y)) return [x, y]
    let num = 0
    let den = 0
    for (let j = Math.max(0, i - r); j <= Math.min(data.length - 1, i + r); j++) {
      const v = data[j][1]
      if (!Number.isFinite(v)) continue
      const w = kernel[Math.abs(j - i)]
      num += w * v
      den += w
    }
    return [x, num / den]
  })
}

// The job page's one smoothing control: `kind` 'ema' | 'gaussian' | 'mean'
// and a strength in [0, 1) from the slider: the EMA weight itself, a
// Gaussian sigma of 20 x strength points, a running-mean window of
// 1 + round(50 x strength) points. Strength 0 leaves the curve as it is.
export const SMOOTHING_KINDS = [
  { value: 'ema', label: 'EMA (debiased)' },
  { value: 'gaussian', label: 'Gaussian' },
  { value: 'mean', label: 'Running mean' },
]
export function smoothSeries(data, kind, strength) {
  const s = Math.min(Math.max(Number(strength) || 0, 0), 0.999)
  if (kind === 'gaussian') return smoothGaussian(data, 20 * s)
  if (kind === 'mean') return smoothRunningMean(data, 1 + Math.round(50 * s))
  return smoothEma(data, s)
}

// The points of `overview` outside [from, to] with `window` (the raw points
// of [from, to]) in their place, in x order: a zoomed chart keeps its whole
// x range (so it can zoom out again) and shows every raw point inside.
export function mergeWindow(overview, window, from, to) {
  return [...overview.filter(([x]) => x < from), ...window, ...overview.filter(([x]) => x > to)]
}
