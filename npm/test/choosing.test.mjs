// Choosing among equal free executors through the Roster API: `choice: 'leastBusy'`
// (the fewest of the role's leases in use relative to its slots) and `weight` (a
// smooth weighted round-robin), each with the `chosen` event that says why.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, validate } from 'rota'
import { executor } from './helpers.mjs'

const create = (doc) => Roster.create({ document: doc, probe: false, options: { minEventLevel: 'debug' } })

test("leastBusy: a release makes the idle executor the next one, not the one leased longest ago", async (t) => {
  const roster = await create({ choice: 'leastBusy', executors: [executor('a', { slots: 2 }), executor('b', { slots: 2 })] })
  t.after(() => roster.close())
  const chosen = []
  roster.on('event', (e) => e.name === 'chosen' && chosen.push(e))
  const first = await roster.lease('coder')
  const second = await roster.lease('coder')
  assert.deepEqual([first.executorId, second.executorId], ['a', 'b'])
  second.release()
  // Round-robin would give a (leased longest ago); b is at 0 of 2, a at 1 of 2.
  const third = await roster.lease('coder')
  assert.equal(third.executorId, 'b')
  assert.equal(chosen.at(-1).message, 'b is chosen for coder: the least busy (0 of 2 in use)')
  assert.deepEqual(chosen.at(-1).fields, { executor: 'b', inUse: 0, role: 'coder', slots: 2 })
  first.release()
  third.release()
})

test('weight 3 to 1: twelve grants split 9:3, a, b, a, a in each cycle', async (t) => {
  const roster = await create({ executors: [executor('fast', { weight: 3, slots: 2 }), executor('api', { slots: 2 })] })
  t.after(() => roster.close())
  const picks = []
  for (let i = 0; i < 12; i++) {
    const lease = await roster.lease('coder')
    picks.push(lease.executorId === 'fast' ? 'f' : 'p')
    lease.release()
  }
  assert.equal(picks.join(''), 'fpfffpfffpff')
  assert.deepEqual(validate({ executors: [executor('a', { weight: 0 })] }), [
    { path: 'executors[0].weight', message: "executor 'a' has a weight that is not a whole number from 1 to 1000" },
  ])
})

test("maxExcluded '50%': the second 429 keeps its executor in the round with a warning; a usage limit still excludes", async (t) => {
  const roster = await create({ maxExcluded: '50%', executors: [executor('a'), executor('b')] })
  t.after(() => roster.close())
  const held = []
  roster.on('event', (e) => e.name === 'exclusionHeldBack' && held.push(e))
  const http429 = Object.assign(new Error('429 Too Many Requests'), { status: 429, headers: { 'retry-after': '60' } })
  assert.equal(roster.report('a', http429)?.kind, 'until')
  assert.equal(roster.report('b', http429), undefined)
  assert.equal(held.length, 1)
  assert.equal(held[0].level, 'warn')
  assert.match(held[0].message, /^b stays in the round \(rate limited; retry after 1m\): taking it out would leave 0 of 2 coder slots in the round; maxExcluded allows at most 50% out$/)
  const lease = await roster.lease('coder')
  assert.equal(lease.executorId, 'b')
  lease.release()
  const usage = Object.assign(new Error('usage limit reached'), { _tag: 'UsageLimitError' })
  assert.equal(roster.report('b', usage)?.kind, 'until')
})
