// Recovery through the Roster API: probation after a cooldown
// (its first lease fails: the next return is later by the doubled cooldown), and
// `other` failures in a row taken out as an outage (health-probed, or the outage
// cooldown), the count reset by a release without a failure.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster } from 'rota'
import { executor, nextEvent, virtualClock } from './helpers.mjs'

const MINUTE = 60_000

const settled = async (promise) => {
  let done = false
  promise.then(
    () => (done = true),
    () => (done = true),
  )
  await new Promise((resolve) => setImmediate(resolve))
  return done
}

test('probation: the first lease after a cooldown fails, and the next return is later by the doubled cooldown', async (t) => {
  const clock = virtualClock()
  const events = []
  const roster = await Roster.create({
    document: {
      recovery: 'probation',
      executors: [executor('a', { slots: 2, cooldown: { usageLimit: '10 minutes' } })],
    },
    probe: false,
    now: clock,
    onEvent: (event) => events.push(event),
  })
  t.after(() => roster.close())
  const usageLimit = () => ({ _tag: 'UsageLimitError', message: 'usage limit reached' })

  const first = roster.report('a', usageLimit())
  assert.equal(first.until, clock() + 10 * MINUTE)
  clock.advance(10 * MINUTE)
  roster.tick()
  assert.ok(events.some((e) => e.name === 'probationStarted' && e.fields.executor === 'a'))
  assert.equal(roster.snapshot().executors[0].probation, true)
  assert.equal(roster.available('coder'), 1, 'one slot of two on probation')

  const lease = await roster.lease('coder')
  const second = roster.lease('coder')
  assert.equal(await settled(second), false, 'the second slot waits for the probation to end')
  const [waiting] = roster.snapshot().queue
  const why = roster.explain({ request: waiting.request, role: 'coder' }).executors[0].reasons
  assert.deepEqual(why, ['on probation: one slot until a lease is released without a failure'])

  // The first lease after the cooldown fails: out again for twice the cooldown.
  const failedAt = clock.advance(MINUTE)
  const again = roster.report('a', usageLimit())
  assert.equal(again.until, failedAt + 20 * MINUTE)
  assert.match(again.reason, /on probation: cooldown doubled to 20m \(2× 10m/)
  lease.release()
  clock.advance(10 * MINUTE)
  roster.tick()
  assert.ok(roster.snapshot().executors[0].exclusion, 'not back after the base cooldown')
  clock.set(failedAt + 20 * MINUTE)
  roster.tick()
  assert.equal(roster.snapshot().executors[0].exclusion, undefined)
  // Back on probation: the waiter takes the one slot; its clean release ends it.
  const granted = await second
  assert.equal(granted.executorId, 'a')
  const third = roster.lease('coder')
  assert.equal(await settled(third), false)
  const ended = nextEvent(roster, 'probationEnded')
  granted.release()
  assert.equal((await ended).fields.slots, 2)
  ;(await third).release()
  assert.equal(roster.snapshot().executors[0].probation, undefined)
  assert.equal(roster.snapshot().executors[0].backoff, 2, 'the multiplier stays until it decays')
})

test('consecutive failures: the third in a row excludes as an outage, health-probed; a clean release resets the count', async (t) => {
  const clock = virtualClock()
  const probed = []
  const roster = await Roster.create({
    document: {
      exclusion: { consecutiveFailures: 3 },
      executors: [
        executor('local', { health: 'http://127.0.0.1:1234/v1/models' }),
        executor('api', { roles: ['reviewer'], cooldown: { outage: '2 minutes' } }),
      ],
    },
    probe: async (url) => {
      probed.push(url)
      return false
    },
    now: clock,
  })
  t.after(() => roster.close())
  const http500 = () => Object.assign(new Error('HTTP 500 internal error'), { status: 500 })

  assert.equal(roster.report('local', http500()), undefined)
  assert.equal(roster.report('local', http500()), undefined)
  assert.equal(roster.snapshot().executors[0].failuresInARow, 2)
  // A lease granted after those failures, released without one: the count starts over.
  ;(await roster.lease('coder')).release()
  assert.equal(roster.snapshot().executors[0].failuresInARow, undefined)
  assert.equal(roster.report('local', http500()), undefined)
  assert.equal(roster.report('local', http500()), undefined)
  const excluded = roster.report('local', http500())
  assert.equal(excluded.kind, 'health')
  assert.match(excluded.reason, /^3 failures in a row \(HTTP 500/)
  await roster.idle()
  assert.deepEqual(probed, ['http://127.0.0.1:1234/v1/models'])
  assert.match(roster.explain('coder').executors[0].reasons[0], /3 failures in a row/)

  // Without a health URL: the outage cooldown.
  for (let i = 0; i < 2; i++) assert.equal(roster.report('api', new Error('nonsense')), undefined)
  const api = roster.report('api', new Error('nonsense'))
  assert.equal(api.kind, 'until')
  assert.equal(api.until, clock() + 2 * MINUTE)
})
