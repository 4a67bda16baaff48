// A parser for the text/event-stream format (the subset kestrel serve
// writes and the standard's field rules): feed it decoded text in chunks of
// any size; it calls onEvent({id, event, data}) for each complete event and
// onRetry(ms) for a "retry:" field. Comments (": keep-alive") are ignored.
export function createSseParser(onEvent, onRetry = () => {}) {
  let buffer = ''
  let data = []
  let event = ''
  let id
  let sawCr = false

  function dispatch() {
    if (data.length > 0) onEvent({ id, event: event || 'message', data: data.join('\n') })
    data = []
    event = ''
    id = undefined
  }

  function line(text) {
    if (text === '') {
      dispatch()
      return
    }
    if (text.startsWith(':')) return
    const colon = text.indexOf(':')
    const field = colon < 0 ? text : text.slice(0, colon)
    let value = colon < 0 ? '' : text.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') data.push(value)
    else if (field === 'event') event = value
    else if (field === 'id' && !value.includes('\0')) id = value
    else if (field === 'retry' && /^\d+$/.test(value)) onRetry(Number(value))
  }

  return {
    push(chunk) {
      let text = chunk
      // A "\r\n" split across two chunks: the "\n" belongs to the "\r".
      if (sawCr && text.startsWith('\n')) text = text.slice(1)
      sawCr = false
      buffer += text
      let start = 0
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer[i]
        if (c !== '\n' && c !== '\r') continue
        line(buffer.slice(start, i))
        if (c === '\r') {
          if (i + 1 < buffer.length) {
            if (buffer[i + 1] === '\n') i++
          } else {
            sawCr = true
          }
        }
        start = i + 1
      }
      buffer = buffer.slice(start)
    },
  }
}
