// Issue 43 items 2 and 6 on the Node roster: a saturated roster borrows instead of
// deadlocking (the upstream's `borrow`), and capacity / capacityChanged, woken by a
// cooldown that ends with nothing else happening.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster } from 'rota'
import { document, executor } from './helpers.mjs'

const both = (id, fields = {}) => executor(id, { roles: ['coder', 'reviewer'], ...fields })

test('every coder slot held: a review with borrow takes its own coder executor instead of waiting forever', async (t) => {
  const events = []
  const roster = await Roster.create({ document: document(both('a'), both('b')), probe: false, onEvent: (e) => events.push(e) })
  t.after(() => roster.close())
  const coderA = await roster.lease('coder', { label: 'story a' })
  const coderB = await roster.lease('coder', { label: 'story b' })
  assert.deepEqual([coderA.executorId, coderB.executorId], ['a', 'b'])
  assert.equal(roster.coderHeld('reviewer', ['a']), true)
  assert.equal(roster.independenceBlocked('reviewer', ['a']), 'held')
  // Without borrow, the review would wait for a story to end (which waits on the review).
  const review = await roster.lease('reviewer', { avoid: ['a'], borrow: roster.executors[0], label: 'story a' })
  assert.equal(review.executorId, 'a')
  assert.equal(review.borrowed, true)
  assert.equal(review.because, 'held')
  assert.ok(
    events.some((e) => e.message === "a takes reviewer for story a on its own coder's slot — not independent (every other executor that takes reviewer is held by a coder)"),
    events.map((e) => e.message).join('\n'),
  )
  assert.equal(roster.snapshot().executors.find((x) => x.id === 'a').busy, 1, 'a borrowed lease holds no slot')
  review.release()
  assert.equal(roster.available('reviewer'), 0, 'and frees none')
  // A lease that is not borrowed carries neither field.
  assert.equal('borrowed' in coderA, false)
  assert.equal('because' in coderA, false)
  // tryLease never borrows.
  assert.equal(await roster.tryLease('reviewer', { avoid: ['a'], borrow: 'a' }), undefined)
  coderA.release()
  coderB.release()
})

test('a waiting review borrows in the queue once coders take every other slot', async (t) => {
  const roster = await Roster.create({ document: document(both('a'), both('b')), probe: false })
  t.after(() => roster.close())
  const coder = await roster.lease('coder')
  const call = await roster.lease('reviewer')
  const coder2 = roster.lease('coder')
  const review = roster.lease('reviewer', { avoid: ['a'], borrow: 'a' })
  assert.equal(roster.snapshot().queue.length, 2)
  call.release() // b frees: the coder (earlier) takes it, and the review borrows a
  const [b, lease] = await Promise.all([coder2, review])
  assert.equal(b.executorId, 'b')
  assert.deepEqual([lease.executorId, lease.borrowed, lease.because], ['a', true, 'held'])
  for (const l of [coder, b, lease]) l.release()
})

test('capacity, and capacityChanged woken by a cooldown ending with nothing else happening', async (t) => {
  const roster = await Roster.create({ document: document(both('a', { slots: 3 }), executor('b', { slots: 2 })), probe: false })
  t.after(() => roster.close())
  assert.equal(roster.capacity('coder'), 4) // a: 3 slots, 2 coder slots (it also reasons); b: 2
  assert.equal(roster.capacity('reviewer'), 3)
  const lease = await roster.lease('coder')
  assert.equal(roster.capacity('coder'), 4, 'a lease does not lower it')
  lease.release()
  assert.equal(await roster.capacityChanged('coder', 3), 4, 'already different: at once')
  roster.exclude('b', { kind: 'until', until: Date.now() + 150, reason: 'cooling down' })
  assert.equal(roster.capacity('coder'), 2)
  // Nothing waits and nothing else happens: only the roster's wake-up at the end of the
  // exclusion can end this wait. (The guard keeps the event loop alive: the roster's
  // own timer never holds a process.)
  const guard = setTimeout(() => {}, 10_000)
  t.after(() => clearTimeout(guard))
  const started = Date.now()
  const back = await Promise.race([
    roster.capacityChanged('coder', 2),
    new Promise((_, reject) => setTimeout(() => reject(new Error('capacityChanged did not wake')), 5_000).unref()),
  ])
  assert.equal(back, 4)
  assert.ok(Date.now() - started >= 100, 'it waited for the exclusion to end')
  // A resume wakes it too; a close rejects a pending one.
  roster.exclude('b', { kind: 'manual', reason: 'paused' })
  const resumed = roster.capacityChanged('coder', 2)
  roster.resume('b')
  assert.equal(await resumed, 4)
  const pending = roster.capacityChanged('coder', 4)
  await roster.close()
  await assert.rejects(pending, { code: 'CLOSED' })
  await assert.rejects(roster.capacityChanged('chef', 0), { code: 'UNKNOWN_ROLE' })
})
