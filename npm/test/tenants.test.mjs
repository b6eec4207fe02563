// Tenants through the Roster API as a user would: with `fairness: 'tenants'`, a
// lease's `tenant` decides its turn among the role's waiting requests. Tenant a
// queues 1,000 leases on one slot, tenant b asks once after them: b is the second
// grant after it asks (one turn of a, then b's), where lease order would serve it
// last; with a weighing 3 it is the third. Events, snapshot and explain name the
// tenant.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, check } from 'rota'
import { executor } from './helpers.mjs'

const create = (doc) => Roster.create({ document: doc, probe: false })
const settle = () => new Promise((resolve) => setImmediate(resolve))

/** Tenant a holds the slot and queues 999 more; b asks once; the grants after b asked, until b's. */
async function starvation(t, doc) {
  const roster = await create({ ...doc, executors: [executor('x', { roles: ['coder'], slots: 1 })] })
  t.after(() => roster.close())
  const order = []
  const held = []
  const ask = (label, tenant) =>
    roster.lease('coder', { tenant, label }).then((lease) => {
      order.push(label)
      held.push(lease)
    })
  const first = await roster.lease('coder', { tenant: 'a', label: 'a0' })
  const waits = []
  for (let i = 1; i < 1000; i++) waits.push(ask(`a${i}`, 'a'))
  await settle()
  waits.push(ask('b', 'b'))
  await settle()
  assert.equal(roster.snapshot().queue.length, 1000)
  const waiting = roster.snapshot().queue.at(-1)
  assert.equal(waiting.tenant, 'b')
  if (doc.fairness === 'tenants') {
    const explained = roster.explain({ request: waiting.request, role: 'coder' })
    assert.equal(explained.tenant, 'b')
    assert.match(explained.turn, /^tenant b \(weight 1\) has turn 2 of the 2 tenants waiting for coder$/)
  }
  first.release()
  while (!order.includes('b')) {
    const before = order.length
    while (order.length === before) await settle()
    if (!order.includes('b')) held.shift().release()
  }
  const served = [...order]
  roster.close()
  await Promise.allSettled(waits)
  return served
}

test('one busy tenant cannot starve another: b, asking once behind 999 waiting leases, is served within its turn', async (t) => {
  assert.deepEqual(await starvation(t, { fairness: 'tenants' }), ['a1', 'b'])
  assert.deepEqual(await starvation(t, { fairness: 'tenants', tenants: { a: { weight: 3 } } }), ['a1', 'a2', 'b'])
})

test('without fairness (the default) the same b waits behind all 999', async (t) => {
  const order = await starvation(t, {})
  assert.equal(order.length, 1000)
  assert.equal(order.at(-1), 'b')
})

test('a granted event names the tenant; a bad weight or tenant is refused naming it', async (t) => {
  const roster = await create({ fairness: 'tenants', executors: [executor('x', { roles: ['coder'] })] })
  t.after(() => roster.close())
  const events = []
  roster.on('event', (e) => e.name === 'granted' && events.push(e))
  const lease = await roster.lease('coder', { tenant: 'acme' })
  assert.equal(events[0].fields.tenant, 'acme')
  assert.match(events[0].message, /\(tenant acme\)$/)
  lease.release()
  await assert.rejects(roster.lease('coder', { tenant: '' }), { code: 'INVALID_INPUT', message: /`tenant` is empty/ })
  const { violations } = check({ fairness: 'tenants', tenants: { a: { weight: 0 } }, executors: [executor('x')] })
  assert.deepEqual(
    violations.map((v) => v.path),
    ['tenants.a'],
  )
})
