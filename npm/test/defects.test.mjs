// Regression tests of the defects found under load and bad input (issue 16, items
// 11-13), and of the event delivery (item 5): a throwing listener is not swallowed.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { Roster } from 'rota'
import { document, executor, keepAlive, nextEvent, projectScript, rejection, thrown, virtualClock } from './helpers.mjs'

const create = (doc, options = {}) => Roster.create({ document: doc, probe: false, ...options })

test('occupy() with the id of a waiting request is refused and the waiter still gets its lease', async (t) => {
  const roster = await create(document(executor('a')))
  const held = await roster.lease('coder')
  const waiting = roster.lease('coder', { id: 'w1' })
  const error = thrown(() => roster.occupy('a', { id: 'w1', role: 'coder' }))
  assert.equal(error.code, 'DUPLICATE_REQUEST')
  assert.equal(roster.snapshot().queue[0]?.request, 'w1', 'the waiter is still queued')
  held.release()
  const lease = await waiting
  assert.equal(lease.request, 'w1')
  assert.equal(roster.available('coder'), 0, 'the waiter holds its slot (not released on its own)')
  lease.release()
  // And a waiter's promise settles on close too.
  const held2 = await roster.lease('coder')
  const waiting2 = roster.lease('coder', { id: 'w2' })
  thrown(() => roster.occupy('a', { id: 'w2' }))
  await roster.close()
  assert.equal((await rejection(waiting2)).code, 'CLOSED')
  held2.release()
})

test("generated request ids never collide with a caller's own (r3 leased, r4 waiting)", async (t) => {
  const roster = await create(document(executor('a', { slots: 3 })))
  t.after(() => roster.close())
  const first = await roster.lease('coder') // r1
  const mine = await roster.lease('coder', { id: 'r3' }) // a live lease under a would-be generated id
  const second = await roster.lease('coder') // r2
  const queued = roster.lease('coder', { id: 'r4' }) // waiting under a would-be generated id
  const next = roster.lease('coder') // r3 is a live lease, r4 waits: r5
  assert.deepEqual(roster.snapshot().queue.map((q) => q.request), ['r4', 'r5'])
  first.release()
  second.release()
  const [a, b] = await Promise.all([queued, next])
  assert.deepEqual([first.request, second.request, a.request, b.request], ['r1', 'r2', 'r4', 'r5'])
  const occupied = roster.occupy('a', { role: 'coder' })
  assert.equal(occupied.request, 'r6', 'occupy with a generated id works beside them')
  for (const lease of [mine, a, b, occupied]) lease.release()
  assert.equal(roster.available('coder'), 3)
})

test('a generated id the core refused (a live lease has it) leaves no stale entry: the id is free again after its lease ends', async (t) => {
  const roster = await create(document(executor('a', { slots: 2 })))
  const events = []
  roster.on('event', (event) => events.push(event))
  const mine = await roster.lease('coder', { id: 'r1' }) // the id the next generated one would be
  const next = await roster.lease('coder') // r1 is refused by the core: r2
  assert.equal(next.request, 'r2')
  mine.release()
  next.release()
  // r1 is no request's any more: a caller may use it again.
  const again = await roster.lease('coder', { id: 'r1' })
  assert.equal(again.request, 'r1')
  again.release()
  await roster.close()
  assert.deepEqual(events.filter((e) => e.level === 'warn').map((e) => e.name), [], 'close() found nothing stale')
})

test('a custom probe that never settles times out like the built-in one, and close() does not hang', async (t) => {
  keepAlive(t) // the probe's timeout (AbortSignal.timeout) never holds the process itself
  const clock = virtualClock()
  let calls = 0
  const roster = await Roster.create({
    document: document(executor('a', { health: 'http://127.0.0.1:9/health' })),
    now: clock,
    probeTimeoutMs: 30,
    probe: () => {
      calls += 1
      return new Promise(() => {}) // ignores its signal, never settles
    },
  })
  const down = nextEvent(roster, 'probeFailed')
  roster.report('a', { kind: 'outage', message: 'ECONNREFUSED' })
  roster.tick()
  await roster.idle()
  const failed = await down
  assert.match(failed.message, /timed out/)
  assert.equal(calls, 1)
  // Probing goes on: the next probe runs.
  clock.advance(60_000)
  roster.tick()
  await roster.idle()
  assert.equal(calls, 2, 'the executor is probed again')
  // A hanging probe in flight does not hold close() up.
  clock.advance(60_000)
  roster.tick()
  const closing = roster.close()
  const outcome = await Promise.race([closing.then(() => 'closed'), new Promise((resolve) => setTimeout(resolve, 5_000, 'hung'))])
  assert.equal(outcome, 'closed')
})

test('a throwing listener is thrown again as an uncaught error, after the roster finished its step', (t) => {
  const script = projectScript(t, 'throwing-listener.mjs', `import { Roster } from 'rota'
const roster = await Roster.create({ document: { executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }, probe: false })
const caught = []
process.on('uncaughtException', (error) => caught.push(error.message))
roster.on('event', (event) => { if (event.name === 'granted') throw new Error('listener bug') })
const lease = await roster.lease('coder')
const after = roster.available('coder')
lease.release()
await new Promise((resolve) => setTimeout(resolve, 20))
console.log(JSON.stringify({ caught, after, available: roster.available('coder') }))
await roster.close()
`)
  const run = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.status, 0, run.stderr)
  assert.deepEqual(JSON.parse(run.stdout), { caught: ['listener bug'], after: 0, available: 1 })
  assert.doesNotMatch(run.stderr, /listener threw/, 'not swallowed into console.error')
})
