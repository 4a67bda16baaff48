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

// The points of `overview` outside [from, to] with `window` (the raw points
// of [from, to]) in their place, in x order: a zoomed chart keeps its whole
// x range (so it can zoom out again) and shows every raw point inside.
export function mergeWindow(overview, window, from, to) {
  return [...overview.filter(([x]) => x < from), ...window, ...overview.filter(([x]) => x > to)]
}
