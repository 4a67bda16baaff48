// A steadier ETA for a running job. The trainer's eta_s comes from its
// last few batches' speed, so it swings with validation pauses and data
// stalls (86 -> 384 -> 147 s within a minute). The page shows instead the
// finish time smoothed over updates: each report's estimate of when the job
// ends (now + eta_s) moves the shown one a fraction of the way, so a single
// outlier moves it little and a lasting change of speed still comes through.

// alpha: how far one report moves the estimate (0..1). A new attempt or an
// estimate more than `resetFactor` times away resets it (a resume, a change
// of epochs).
export function createEtaSmoother({ alpha = 0.2, resetFactor = 10 } = {}) {
  let finishMs = null
  let key = ''
  return {
    // One progress report at `nowMs`; returns the ETA in seconds to show
    // (null: none). `attempt` distinguishes attempts (a retry restarts).
    update(etaSeconds, nowMs, attempt = '') {
      if (typeof etaSeconds !== 'number' || !Number.isFinite(etaSeconds) || etaSeconds < 0) return this.at(nowMs)
      const target = nowMs + etaSeconds * 1000
      const left = finishMs === null ? 0 : finishMs - nowMs
      const fresh = finishMs === null || String(attempt) !== key
      const far = left > 0 && (etaSeconds * 1000 > resetFactor * left || etaSeconds * 1000 * resetFactor < left)
      key = String(attempt)
      finishMs = fresh || far || left <= 0 ? target : finishMs + alpha * (target - finishMs)
      return this.at(nowMs)
    },
    // The ETA at `nowMs` (counts down between reports; never below 0).
    at(nowMs) {
      return finishMs === null ? null : Math.max(0, (finishMs - nowMs) / 1000)
    },
  }
}

// "2 min 27 s", "45 s", "1 h 05 min".
export function fmtEta(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return ''
  const s = Math.round(seconds)
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`
}
