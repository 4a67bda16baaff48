// The console tab's text model (issue 33 finding 4), apart from the page so
// node can test it: chunks of an attempt's log as the server streams them
// (GET /api/jobs/ID/log: {offset, text}) folded into lines. A carriage
// return rewrites its line (a progress bar redraws in place), so a line
// keeps what follows its last '\r'; at most `max` lines are kept (the
// oldest go first, counted in `dropped`).
export class ConsoleLog {
  constructor(max = 5000) {
    this.max = max
    this.lines = [] // complete lines
    this.partial = '' // the last line, not ended yet
    this.dropped = 0
    this.startOffset = null // the file offset the first chunk began at
    this.endOffset = 0
  }

  // One streamed chunk; chunks must come in file order (the stream's ids).
  push({ offset, text }) {
    if (this.startOffset === null) this.startOffset = offset
    this.endOffset = offset + new TextEncoder().encode(text).length
    const parts = (this.partial + text).split('\n')
    this.partial = parts.pop()
    for (const p of parts) this.lines.push(ConsoleLog.redraw(p))
    if (this.lines.length > this.max) {
      const n = this.lines.length - this.max
      this.lines.splice(0, n)
      this.dropped += n
    }
  }

  static redraw(line) {
    const cr = line.replace(/\r+$/, '').lastIndexOf('\r')
    return (cr < 0 ? line : line.slice(cr + 1)).replace(/\r+$/, '')
  }

  // Every line, the unfinished one last (when it has text).
  all() {
    const last = ConsoleLog.redraw(this.partial)
    return last ? this.lines.concat([last]) : this.lines.slice()
  }

  // Lines containing `query` (case-insensitive), each with its 1-based number among all().
  search(query) {
    const q = query.toLowerCase()
    const out = []
    this.all().forEach((text, i) => {
      if (!q || text.toLowerCase().includes(q)) out.push({ n: i + 1 + this.dropped, text })
    })
    return out
  }
}
