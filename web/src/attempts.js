// How the job page shows an attempt's outcome: succeeded, running, failed
// (red) or cancelled (grey: a user's stop, not a failure), and its failure
// text from the fields that are set (never "/ : " for empty ones).

export function attemptOutcome(a) {
  if (a.succeeded) return { text: 'succeeded', type: 'success' }
  if (!a.ended_ms) return { text: 'running', type: 'primary' }
  if (a.reason === 'cancelled') return { text: 'cancelled', type: 'info' }
  return { text: 'failed', type: 'danger' }
}

// "train / retryable: oom: CUDA out of memory", "cancelled by the user".
export function attemptFailureText(a) {
  if (a.succeeded || !a.ended_ms) return ''
  if (a.reason === 'cancelled') return a.message || 'cancelled'
  const where = [a.stage, a.failure_class].filter((x) => x && x !== 'none').join(' / ')
  const what = [a.reason, a.message].filter((x) => x && x !== a.stage).join(': ')
  return [where, what].filter(Boolean).join(': ')
}
