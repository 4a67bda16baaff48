// web/src/sse.js: events split across chunks at every byte, CRLF and CR
// line ends (a CRLF split between chunks too), multi-line data, comments,
// retry, and ids.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createSseParser } from '../../web/src/sse.js'

const STREAM =
  'retry: 1000\n\nid: 1\nevent: state\ndata: {"a":1}\n\n: keep-alive\n\n' +
  'id: 2\r\nevent: metric\r\ndata: line1\r\ndata: line2\r\n\r\n' +
  'id: 3\rdata:nospace\r\r' +
  'data: no id\n\n' +
  'id: 4\ndata: unterminated'

const EXPECTED = [
  { id: '1', event: 'state', data: '{"a":1}' },
  { id: '2', event: 'metric', data: 'line1\nline2' },
  { id: '3', event: 'message', data: 'nospace' },
  { id: undefined, event: 'message', data: 'no id' },
]

function parseIn(chunks) {
  const events = []
  const retries = []
  const p = createSseParser(
    (e) => events.push(e),
    (ms) => retries.push(ms),
  )
  for (const c of chunks) p.push(c)
  return { events, retries }
}

test('whole stream in one chunk', () => {
  const { events, retries } = parseIn([STREAM])
  assert.deepEqual(events, EXPECTED)
  assert.deepEqual(retries, [1000])
})

test('every split point of the stream gives the same events', () => {
  for (let i = 0; i <= STREAM.length; i++) {
    const { events } = parseIn([STREAM.slice(0, i), STREAM.slice(i)])
    assert.deepEqual(events, EXPECTED, `split at ${i}`)
  }
})

test('one character at a time', () => {
  assert.deepEqual(parseIn([...STREAM]).events, EXPECTED)
})

test('the last event is dispatched only when its blank line arrives', () => {
  const events = []
  const p = createSseParser((e) => events.push(e))
  p.push('id: 9\ndata: x\n')
  assert.equal(events.length, 0)
  p.push('\n')
  assert.deepEqual(events, [{ id: '9', event: 'message', data: 'x' }])
})
