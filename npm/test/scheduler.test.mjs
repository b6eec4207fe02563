// The clock-and-timer seam (issue 44, item 1): `Roster.create({ scheduler })` with
// `now()`, `setTimer(at, fn)`, `clearTimer(handle)` carries every timer of a roster in
// memory (the wake-up timer: exclusion ends, deadlines, probes; the state writer's
// retry; a probe's timeout), and `flush()` resolves once every decided write is in
// the store. Time here is a virtual scheduler's: nothing waits on a real timer.

import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Roster, memoryState } from 'rota'
import { START, document, executor, flush, nextEvent, rejection, tempDir } from './helpers.mjs'

/** A scheduler on virtual time: `advance(ms)` fires, in time order, every timer due. */
function virtualScheduler(start = START) {
  let now = start
  let next = 0
  const timers = new Map()
  const scheduler = {
    now: () => now,
    setTimer(at, fn) {
      assert.ok(Number.isSafeInteger(at), `setTimer takes an epoch ms, got ${at}`)
      const handle = { id: ++next }
      timers.set(handle, { at, fn })
      return handle
    },
    clearTimer(handle) {
      timers.delete(handle)
    },
    /** The times of the armed timers, soonest first. */
    armed: () => [...timers.values()].map((t) => t.at).sort((a, b) => a - b),
    async advance(ms) {
      const until = now + ms
      for (;;) {
        const due = [...timers.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0]
        if (due === undefined) break
        timers.delete(due[0])
        now = Math.max(now, due[1].at)
        due[1].fn()
        await flush()
      }
      now = until
      await flush()
    },
  }
  return scheduler
}

test('the wake-up timer goes through the scheduler: an exclusion ends when its time is advanced to', async (t) => {
  const scheduler = virtualScheduler()
  const roster = await Roster.create({ document: document(executor('a')), scheduler, probe: false })
  t.after(() => roster.close())
  assert.deepEqual(scheduler.armed(), [])
  roster.report('a', { kind: 'usageLimit', message: 'limit' })
  assert.equal(roster.available('coder'), 0)
  // The core's wake-up, at the exclusion's end, as an epoch ms on the scheduler's clock.
  assert.deepEqual(scheduler.armed(), [START + 30 * 60_000])
  const back = nextEvent(roster, 'back')
  await scheduler.advance(30 * 60_000 - 1)
  assert.equal(roster.available('coder'), 0)
  await scheduler.advance(1)
  assert.deepEqual((await back).fields.executors, ['a'])
  assert.equal(roster.available('coder'), 1)
})

test("a lease's timeoutMs ends on the scheduler's time; a waiter is granted when a slot frees", async (t) => {
  const scheduler = virtualScheduler()
  const roster = await Roster.create({ document: document(executor('a')), scheduler, probe: false })
  t.after(() => roster.close())
  const held = await roster.lease('coder')
  const late = roster.lease('coder', { timeoutMs: 1_000 })
  let settled = false
  late.then(
    () => (settled = true),
    () => (settled = true),
  )
  await scheduler.advance(999)
  assert.equal(settled, false)
  await scheduler.advance(1)
  assert.equal((await rejection(late)).code, 'TIMEOUT')
  const next = roster.lease('coder', { timeoutMs: 1_000 })
  held.release()
  assert.equal((await next).executorId, 'a')
})

test("a probe's timeout runs on the scheduler: a probe that never answers counts as down at probeTimeoutMs", async (t) => {
  const scheduler = virtualScheduler()
  let probes = 0
  const roster = await Roster.create({
    document: document(executor('a', { health: 'http://127.0.0.1:1/health' })),
    scheduler,
    probeTimeoutMs: 2_000,
    // Never answers, and ignores its signal.
    probe: () => {
      probes += 1
      return new Promise(() => {})
    },
  })
  t.after(() => roster.close())
  const events = []
  roster.on('event', (event) => events.push(event.name))
  roster.report('a', { kind: 'outage', message: 'connection refused' })
  const waiting = roster.lease('coder')
  waiting.catch(() => {})
  // Probed at once; its timeout is the one timer armed.
  assert.equal(probes, 1)
  assert.deepEqual(scheduler.armed(), [START + 2_000])
  await scheduler.advance(1_999)
  assert.ok(!events.includes('probeFailed'))
  await scheduler.advance(1)
  assert.ok(events.includes('probeFailed'))
  // Down: probed again a probe interval later (15 s while a request waits).
  await scheduler.advance(14_999)
  assert.equal(probes, 1)
  await scheduler.advance(1)
  assert.equal(probes, 2)
})

test('the state writer retries on the scheduler; flush() rejects with the failed write, resolves once it lands', async (t) => {
  const scheduler = virtualScheduler()
  const store = memoryState()
  let failing = true
  const flaky = {
    load: (context) => store.load(context),
    save: async (update, context) => {
      if (failing) throw new Error('disk full')
      await store.save(update, context)
    },
  }
  const roster = await Roster.create({ document: document(executor('a'), executor('b')), scheduler, probe: false, state: flaky, stateRetry: { firstMs: 500, maxMs: 500 } })
  t.after(() => roster.close())
  roster.exclude('a', { reason: 'ops' })
  assert.equal((await rejection(roster.flush())).message, 'disk full')
  // The retry is a timer on the scheduler, 500 ms on.
  assert.deepEqual(scheduler.armed(), [START + 500])
  failing = false
  await scheduler.advance(500)
  assert.deepEqual(store.value.exclusions.map((e) => e.id), ['a'])
  roster.exclude('b', { reason: 'ops' })
  await roster.flush()
  assert.deepEqual(store.value.exclusions.map((e) => e.id).sort(), ['a', 'b'])
  // A failed write flushed at once leaves no retry armed behind it.
  failing = true
  roster.resume('a')
  await rejection(roster.flush())
  failing = false
  await roster.flush()
  assert.deepEqual(store.value.exclusions.map((e) => e.id), ['b'])
  assert.deepEqual(scheduler.armed(), [])
})

test('flush() resolves once a state file holds every decided write', async (t) => {
  const statePath = join(tempDir(t), 'state.json')
  const roster = await Roster.create({ document: document(executor('a')), statePath, probe: false })
  t.after(() => roster.close())
  roster.exclude('a', { reason: 'ops' })
  await roster.flush()
  const file = JSON.parse(readFileSync(statePath, 'utf8'))
  assert.deepEqual(file.value.exclusions.map((e) => e.id), ['a'])
  // Nothing to write: resolves at once.
  await roster.flush()
})

test('a scheduler that is not one is INVALID_INPUT naming what is missing', async () => {
  const doc = document(executor('a'))
  const refused = async (options) => (await rejection(Roster.create({ document: doc, ...options })))
  let error = await refused({ scheduler: { now: () => START } })
  assert.equal(error.code, 'INVALID_INPUT')
  assert.match(error.message, /scheduler lacks setTimer\(\), clearTimer\(\)/)
  error = await refused({ scheduler: { now: () => START, setTimer: () => 1, clearTimer: 'no' } })
  assert.match(error.message, /scheduler lacks clearTimer\(\)/)
  error = await refused({ scheduler: 5 })
  assert.match(error.message, /scheduler must be \{ now\(\), setTimer\(at, fn\), clearTimer\(handle\) \}/)
  error = await refused({ scheduler: virtualScheduler(), now: () => START })
  assert.match(error.message, /give the clock once/)
  error = await refused({ scheduler: virtualScheduler(), shared: { connectionString: 'postgres://nowhere', roster: 'x' } })
  assert.equal(error.code, 'INVALID_INPUT')
  assert.match(error.message, /drop scheduler/)
  // A clock that gives no time fails the start.
  error = await refused({ scheduler: { now: () => NaN, setTimer: () => 1, clearTimer() {} } })
  assert.equal(error.code, 'INVALID_INPUT')
})
