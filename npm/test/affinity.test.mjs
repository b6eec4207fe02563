// Affinity keys through the Roster API as a user would: a lease's `affinity` key
// sticks to the executor of its last grant (a prompt cache lives there), yields when
// that executor is busy, and is forgotten after the document's `affinityTtl` of
// idleness on the roster's clock; `explain` and the granted event say what it did.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, check } from 'rota'
import { executor, virtualClock } from './helpers.mjs'

const create = (doc, extra = {}) => Roster.create({ document: doc, probe: false, ...extra })

test('a key sticks to its executor, yields while it is busy, and moves with the grant', async (t) => {
  const clock = virtualClock()
  const roster = await create({ executors: [executor('a'), executor('b')] }, { now: clock })
  t.after(() => roster.close())
  const granted = []
  roster.on('event', (e) => e.name === 'granted' && granted.push(e))
  const first = await roster.lease('coder', { affinity: 'session-1' })
  assert.equal(first.executorId, 'a')
  first.release()
  // Round-robin alone would give b (never leased): the key keeps a.
  const explained = roster.explain({ role: 'coder', affinity: 'session-1' })
  assert.equal(explained.pick, 'a')
  assert.match(explained.affinity, /^key 'session-1' sticks to a until .*: it takes the request$/)
  const again = await roster.lease('coder', { affinity: 'session-1' })
  assert.equal(again.executorId, 'a')
  assert.equal(granted.at(-1).fields.affinity, 'session-1')
  assert.match(granted.at(-1).message, /affinity: key 'session-1' stays on it/)
  // a busy: the key yields to b, and moves there.
  const moved = await roster.lease('coder', { affinity: 'session-1' })
  assert.equal(moved.executorId, 'b')
  again.release()
  moved.release()
  const after = await roster.lease('coder', { affinity: 'session-1' })
  assert.equal(after.executorId, 'b')
  after.release()
})

test("a key idle for the document's affinityTtl is forgotten (the roster's clock)", async (t) => {
  const clock = virtualClock()
  const roster = await create({ executors: [executor('a'), executor('b')], affinityTtl: '1 minute' }, { now: clock })
  t.after(() => roster.close())
  const first = await roster.lease('coder', { affinity: 'k' })
  assert.equal(first.executorId, 'a')
  first.release()
  clock.advance(59_000)
  const again = await roster.lease('coder', { affinity: 'k' })
  assert.equal(again.executorId, 'a', 'refreshed within the TTL')
  again.release()
  clock.advance(60_000)
  const later = await roster.lease('coder', { affinity: 'k' })
  assert.equal(later.executorId, 'b', 'forgotten: round-robin decides')
  later.release()
})

test('a bad affinity key is INVALID_INPUT naming the field; a bad affinityTtl a violation naming it', async (t) => {
  const roster = await create({ executors: [executor('a')] })
  t.after(() => roster.close())
  await assert.rejects(roster.lease('coder', { affinity: '' }), (e) => e.code === 'INVALID_INPUT' && /`affinity` is empty/.test(e.message))
  await assert.rejects(roster.lease('coder', { affinity: 'x'.repeat(1025) }), (e) => e.code === 'INVALID_INPUT' && /`affinity` is 1025 bytes long/.test(e.message))
  const checked = check({ executors: [executor('a')], affinityTtl: 'soon' })
  assert.deepEqual(
    checked.violations.map((v) => v.path),
    ['affinityTtl'],
  )
  await assert.rejects(create({ executors: [executor('a')], affinityTtl: '0s' }), (e) => e.code === 'INVALID_DOCUMENT' && /affinityTtl/.test(e.message))
})
