// What a lease carries and says (issue 43 items 3, 5, 8): its clone number under the
// document's `clones: 'numbered'`, its request's `purpose`, and the typed lease events.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, cloneName } from 'rota'
import { executor, virtualClock } from './helpers.mjs'

const create = (doc, extra = {}) => Roster.create({ document: doc, probe: false, ...extra })

test("a lease exposes its clone number (clones: 'numbered') and its purpose; the events say them", async (t) => {
  const roster = await create({ clones: 'numbered', executors: [executor('codex', { roles: ['coder', 'reviewer'], slots: 3 })] })
  t.after(() => roster.close())
  const events = []
  roster.on('event', (event) => events.push(event))
  const first = await roster.lease('reviewer', { label: 'story a', purpose: 'adversarial lens' })
  assert.equal(first.clone, 1)
  assert.equal(first.purpose, 'adversarial lens')
  const granted = events.find((e) => e.name === 'granted')
  assert.equal(granted.message, 'codex#1 takes reviewer for story a · adversarial lens')
  assert.equal(granted.fields.clone, 1)
  assert.equal(granted.fields.purpose, 'adversarial lens')
  const second = await roster.lease('coder')
  assert.equal(second.clone, 2)
  assert.equal(second.purpose, undefined)
  first.release()
  const released = events.find((e) => e.name === 'released')
  assert.equal(released.message, "codex#1's slot is released (reviewer for story a · adversarial lens)")
  const third = await roster.lease('coder')
  assert.equal(third.clone, 1, 'the lowest free number again')
  assert.equal(cloneName(third.executorId, third.clone), 'codex#1')
  assert.deepEqual(roster.snapshot().executors[0].leases.map((l) => l.clone), [2, 1])
})

test('without the clone rule a lease has no clone; a purpose needs no rule', async (t) => {
  const roster = await create({ executors: [executor('a')] })
  t.after(() => roster.close())
  const lease = await roster.lease('coder', { purpose: 'security lens' })
  assert.equal(lease.clone, undefined)
  assert.equal(lease.purpose, 'security lens')
  assert.equal(roster.snapshot().executors[0].leases[0].purpose, 'security lens')
  await assert.rejects(roster.lease('coder', { purpose: 'p'.repeat(4097) }), (error) => error.code === 'INVALID_INPUT' && /`purpose` is 4097 bytes long/.test(error.message))
})

test("leaseEvents: 'typed': a waited grant says how long it waited; back says why", async (t) => {
  const clock = virtualClock()
  const roster = await create({ leaseEvents: 'typed', executors: [executor('a')] }, { now: clock })
  t.after(() => roster.close())
  const events = []
  roster.on('event', (event) => events.push(event))
  const held = await roster.lease('coder', { label: 'S01' })
  const waiting = roster.lease('coder', { label: 'S02' })
  clock.advance(1500)
  held.release()
  await waiting
  const granted = events.filter((e) => e.name === 'granted')
  assert.equal(granted[0].fields.waitedMs, undefined, 'granted at once')
  assert.equal(granted[1].fields.waitedMs, 1500)
  const released = events.find((e) => e.name === 'released')
  assert.deepEqual([released.fields.role, released.fields.label], ['coder', 'S01'])
  roster.exclude('a', { kind: 'manual', reason: 'maintenance' })
  roster.resume('a')
  assert.equal(events.find((e) => e.name === 'resumed').fields.why, 'resumed')
})
