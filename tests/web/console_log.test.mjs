// The job page's console model (web/src/consoleLog.js) alone: chunks cut
// anywhere make the same lines, a carriage return redraws its line, the
// oldest lines go past the cap, and search matches without case.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ConsoleLog } from '../../web/src/consoleLog.js'

test('chunks cut mid-line join into the same lines', () => {
  const text = 'epoch 1/3\n  box 1.2 cls 0.8\nepoch 2/3\n'
  for (let cut = 0; cut <= text.length; cut++) {
    const log = new ConsoleLog()
    log.push({ offset: 0, text: text.slice(0, cut) })
    log.push({ offset: cut, text: text.slice(cut) })
    assert.deepEqual(log.all(), ['epoch 1/3', '  box 1.2 cls 0.8', 'epoch 2/3'], `cut at ${cut}`)
  }
})

test('a carriage return redraws the line; an unfinished line shows last', () => {
  const log = new ConsoleLog()
  log.push({ offset: 0, text: 'batch 1/9\rbatch 5/9\rbatch 9/9\r\ndone\npartial' })
  assert.deepEqual(log.all(), ['batch 9/9', 'done', 'partial'])
  assert.equal(log.endOffset, 43)
})

test('the cap drops the oldest lines and numbers stay those of the file', () => {
  const log = new ConsoleLog(3)
  log.push({ offset: 100, text: 'a\nb\nc\nd\nE\n' })
  assert.deepEqual(log.all(), ['c', 'd', 'E'])
  assert.equal(log.dropped, 2)
  assert.equal(log.startOffset, 100)
  assert.deepEqual(log.search('e'), [{ n: 5, text: 'E' }])
  assert.equal(log.search('').length, 3)
})
