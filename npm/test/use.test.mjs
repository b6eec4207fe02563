// roster.use(role, fn, options) — lease, run, report what it throws, release — and the
// counters (waiting, leased, per role) read without a snapshot.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, RotaError } from 'rota'
import { document, executor, rejection, virtualClock } from './helpers.mjs'

const create = (doc, options = {}) => Roster.create({ document: doc, probe: false, ...options })

test('use: resolves with what fn returns and releases the lease', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  const seen = []
  const result = await roster.use('coder', async (lease) => {
    seen.push([lease.executorId, roster.available('coder'), roster.leased])
    return 42
  })
  assert.equal(result, 42)
  assert.deepEqual(seen, [['a', 0, 1]])
  assert.equal(roster.available('coder'), 1)
  assert.equal(roster.leased, 0)
})

test('use: reports what fn throws, rethrows it, releases', async (t) => {
  const clock = virtualClock()
  const roster = await create(document(executor('a'), executor('b')), { now: clock })
  t.after(() => roster.close())
  const failure = Object.assign(new Error('429 Too Many Requests'), { status: 429, headers: { 'retry-after': '120' } })
  const error = await rejection(roster.use('coder', () => Promise.reject(failure), { prefer: 'a' }))
  assert.equal(error, failure, 'the caller gets its own error back')
  const a = roster.snapshot().executors.find((e) => e.id === 'a')
  assert.equal(a.exclusion?.kind, 'until', 'the 429 with Retry-After was reported')
  assert.equal(a.exclusion?.until, clock() + 120_000)
  assert.equal(a.busy, 0, 'released')
  // report: false leaves it unreported.
  const other = await rejection(roster.use('coder', () => { throw failure }, { report: false }))
  assert.equal(other, failure)
  assert.equal(roster.snapshot().executors.find((e) => e.id === 'b').exclusion, undefined)
  assert.equal(roster.available('coder'), 1)
})

test('use: lease options pass through; a lease that fails never runs fn', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  let ran = false
  const error = await rejection(roster.use('coder', () => { ran = true }, { avoid: ['a'] }))
  assert.equal(error.code, 'EXHAUSTED')
  assert.equal(ran, false)
  assert.equal((await rejection(roster.use('coder', 'not a function'))).code, 'INVALID_INPUT')
})

test('use: a fn that throws after close still releases and rethrows', async (t) => {
  const roster = await create(document(executor('a')))
  const error = await rejection(
    roster.use('coder', async () => {
      await roster.close()
      throw new Error('late')
    }),
  )
  assert.equal(error.message, 'late')
  assert.equal(roster.leased, 0)
  t.after(() => roster.close())
})

test('counters: waiting and leased, in total and per role, follow every grant, wait and end', async (t) => {
  const clock = virtualClock()
  const doc = document(executor('a', { roles: ['coder', 'judge'], slots: 2, coderSlots: 2 }))
  const roster = await create(doc, { now: clock })
  t.after(() => roster.close())
  assert.deepEqual([roster.waiting, roster.leased], [0, 0])
  const one = await roster.lease('coder')
  const two = await roster.lease('judge')
  assert.deepEqual([roster.waiting, roster.leased], [0, 2])
  assert.deepEqual(roster.counts('coder'), { waiting: 0, leased: 1 })
  const controller = new AbortController()
  const waits = [
    roster.lease('coder'),
    roster.lease('judge', { signal: controller.signal }),
    roster.lease('coder', { timeoutMs: 1_000 }),
  ]
  assert.equal(roster.waiting, 3)
  assert.equal(roster.waiting, roster.snapshot().queue.length, 'the counter agrees with the snapshot')
  assert.deepEqual(roster.counts('coder'), { waiting: 2, leased: 1 })
  assert.deepEqual(roster.counts('judge'), { waiting: 1, leased: 1 })
  controller.abort()
  await rejection(waits[1])
  assert.deepEqual(roster.counts('judge'), { waiting: 0, leased: 1 })
  clock.advance(1_000)
  roster.tick()
  await rejection(waits[2])
  assert.equal(roster.waiting, 1)
  one.release()
  const three = await waits[0]
  assert.deepEqual(roster.counts('coder'), { waiting: 0, leased: 1 })
  three.release()
  three.release()
  two.release()
  assert.deepEqual([roster.waiting, roster.leased], [0, 0])
  // An occupied slot is held too.
  const occupied = roster.occupy('a', { role: 'coder' })
  assert.equal(roster.counts('coder').leased, 1)
  occupied.release()
  assert.equal(roster.leased, 0)
  assert.ok(roster.counts('nope') instanceof Object && roster.counts('nope').waiting === 0)
  assert.ok(new RotaError('CLOSED', 'x') instanceof RotaError)
})
