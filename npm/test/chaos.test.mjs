// The chaos test: hundreds of callers on one roster with random aborts, timeouts,
// cancels (tryLease), releases, reports, exclusions, probes and clock jumps. After
// every step: the counters agree with the snapshot, no slot leaks (the executors'
// busy slots are exactly the leases callers hold), and no waiter sleeps beside a free
// slot it could take (the core's explain of every queued request picks nobody). At the
// end every promise has settled.
//
// Seeded: the seed is printed; replay with ROTA_CHAOS_SEED=<seed> (and
// ROTA_CHAOS_STEPS=<n> for a longer run).

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, memoryState } from 'rota'
import { START } from './helpers.mjs'

const SEED = Number(process.env.ROTA_CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31))
const STEPS = Number(process.env.ROTA_CHAOS_STEPS ?? 1_500)
const ROLES = ['coder', 'reviewer', 'judge']
const KINDS = ['rateLimit', 'outage', 'authentication', 'other', 'usageLimit', 'modelUnavailable']

/** mulberry32: a small seeded generator. */
function generator(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
  const int = (n) => Math.floor(next() * n)
  const pick = (list) => list[int(list.length)]
  return { next, int, pick, chance: (p) => next() < p }
}

const flush = () => new Promise((resolve) => setImmediate(resolve))

test(`chaos: hundreds of callers, every promise settles once, no slot leaks, no sleeping waiter (seed ${SEED})`, async () => {
  console.log(`chaos seed: ${SEED} (replay: ROTA_CHAOS_SEED=${SEED} npm test chaos)`)
  const rng = generator(SEED)
  let now = START
  const executors = Array.from({ length: 5 }, (_, i) => ({
    id: `e${i}`,
    harness: 'pi',
    roles: ROLES.filter((_, r) => r === i % 3 || rng.chance(0.5)),
    slots: 1 + rng.int(3),
    ...(i % 2 === 0 ? { health: `http://127.0.0.1:9/e${i}` } : {}),
    cooldown: { rateLimit: '20s', outage: '10s', usageLimit: '30s' },
  }))
  for (const e of executors) if (e.roles.includes('coder') && e.slots > 1) e.coderSlots = e.slots
  const roster = await Roster.create({
    document: { executors },
    now: () => now,
    state: memoryState(),
    probe: async () => {
      await null
      return rng.chance(0.6)
    },
  })

  const calls = [] // { promise, settled, outcome }
  const held = new Set() // leases callers hold
  const inUse = new Set() // of which: inside a use() callback
  const controllers = []
  const track = (promise, kind) => {
    const call = { kind, settled: 0 }
    call.promise = promise.then(
      (value) => {
        call.settled += 1
        call.outcome = 'resolved'
        return value
      },
      (error) => {
        call.settled += 1
        call.outcome = error?.code ?? error?.name ?? 'rejected'
      },
    )
    calls.push(call)
    return call
  }
  const leaseOptions = () => {
    const options = {}
    if (rng.chance(0.4)) options.timeoutMs = rng.int(5_000)
    if (rng.chance(0.3)) {
      const controller = new AbortController()
      controllers.push(controller)
      options.signal = controller.signal
    }
    if (rng.chance(0.2)) options.avoid = [rng.pick(executors).id]
    if (rng.chance(0.3)) options.rank = rng.int(4)
    if (rng.chance(0.1)) options.prefer = rng.pick(executors).id
    return options
  }
  const failure = () => ({ kind: rng.pick(KINDS), message: 'chaos', ...(rng.chance(0.3) ? { retryAfterMs: rng.int(30_000) } : {}) })

  const check = (step) => {
    const snapshot = roster.snapshot()
    const where = `step ${step}, seed ${SEED}`
    assert.equal(roster.waiting, snapshot.queue.length, `${where}: the waiting counter`)
    const busy = snapshot.executors.reduce((sum, e) => sum + e.busy, 0)
    assert.equal(busy, held.size, `${where}: busy slots are exactly the leases callers hold`)
    assert.equal(roster.leased, held.size, `${where}: the leased counter`)
    for (const q of snapshot.queue) {
      const why = roster.explain({ role: q.role, request: q.request })
      assert.equal(why.pick, undefined, `${where}: ${q.request} waits while ${why.pick} could take it`)
    }
  }

  for (let step = 0; step < STEPS; step += 1) {
    const roll = rng.next()
    if (roll < 0.3 || calls.length < 50) {
      const role = rng.pick(ROLES)
      const options = leaseOptions()
      const call = track(roster.lease(role, options), 'lease')
      call.promise.then((lease) => lease && held.add(lease))
    } else if (roll < 0.38) {
      const call = track(roster.tryLease(rng.pick(ROLES), { ...leaseOptions(), timeoutMs: undefined }), 'tryLease')
      call.promise.then((lease) => lease && held.add(lease))
    } else if (roll < 0.48) {
      const rounds = rng.int(4)
      const throws = rng.chance(0.4) ? failure() : undefined
      track(
        roster.use(
          rng.pick(ROLES),
          async (lease) => {
            held.add(lease)
            inUse.add(lease)
            try {
              for (let i = 0; i < rounds; i += 1) await flush()
              if (throws !== undefined) throw Object.assign(new Error('use failed'), throws)
              return lease.executorId
            } finally {
              held.delete(lease)
              inUse.delete(lease)
            }
          },
          leaseOptions(),
        ),
        'use',
      )
    } else if (roll < 0.62) {
      const lease = rng.pick([...held])
      if (lease !== undefined) {
        if (rng.chance(0.3)) roster.report(lease.executorId, failure())
        // Leases inside use() are released by use itself.
        if (!inUse.has(lease)) {
          held.delete(lease)
          lease.release()
          if (rng.chance(0.2)) lease.release()
        }
      }
    } else if (roll < 0.72) {
      const controller = rng.pick(controllers)
      controller?.abort(rng.chance(0.5) ? new Error('chaos abort') : undefined)
    } else if (roll < 0.76) {
      const id = rng.pick(executors).id
      if (rng.chance(0.5)) roster.exclude(id, { reason: 'chaos', until: rng.chance(0.5) ? now + 1 + rng.int(20_000) : undefined })
      else roster.resume(id)
    } else {
      now += rng.int(3_000)
      roster.tick()
    }
    await flush()
    check(step)
  }

  // Wind down: every executor back, every held lease released, time runs out every deadline.
  for (const e of executors) roster.resume(e.id)
  for (let i = 0; i < 20; i += 1) {
    for (const lease of [...held]) {
      if (inUse.has(lease)) continue
      held.delete(lease)
      lease.release()
    }
    now += 10_000
    roster.tick()
    await flush()
    await roster.idle()
    check(`wind-down ${i}`)
  }
  await roster.close()
  await Promise.all(calls.map((c) => c.promise))
  await flush()
  for (const lease of [...held]) lease.release()
  const unsettled = calls.filter((c) => c.settled !== 1)
  assert.deepEqual(unsettled.map((c) => c.kind), [], `seed ${SEED}: every promise settles exactly once`)
  const outcomes = {}
  for (const c of calls) outcomes[c.outcome] = (outcomes[c.outcome] ?? 0) + 1
  console.log(`chaos: ${calls.length} calls, outcomes ${JSON.stringify(outcomes)}`)
  assert.ok(calls.length >= 300, 'hundreds of callers')
  assert.ok(outcomes.resolved > 0 && (outcomes.TIMEOUT ?? 0) > 0, 'grants and timeouts both happened')
})
