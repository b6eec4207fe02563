// The driver's table of live requests (src/pending.js) behaves as a Map in every
// operation the driver uses: a seeded random sequence of them against a Map.

import assert from 'node:assert/strict'
import { test } from 'node:test'

const { PendingRequest, PendingRequests } = await import(new URL('./pending.js', import.meta.resolve('rota')).href)

/** A seeded source of whole numbers below n, its seed printed (ROTA_PENDING_SEED replays). */
function seeded(label) {
  const seed = Number(process.env.ROTA_PENDING_SEED ?? Date.now() % 1_000_000)
  console.log(`# ${label}: seed ${seed} (ROTA_PENDING_SEED=${seed} replays)`)
  let state = seed
  // An LCG's high bits (its low bits repeat with a short period).
  const random = (n) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31
    return Math.floor((state / 2 ** 31) * n)
  }
  return { seed, random }
}

test('PendingRequests answers as a Map does, in insertion order', () => {
  const { seed, random } = seeded('pending')
  const table = new PendingRequests()
  const model = new Map()
  for (let step = 0; step < 20_000; step += 1) {
    // Few ids, so that sets, gets and deletes often meet the same one (built anew
    // each time, as the core's answers name a request with a string of their own).
    const id = `r${random(12)}`
    const where = `step ${step}, seed ${seed}`
    switch (random(5)) {
      case 0:
      case 1: {
        const value = { step }
        assert.equal(table.set(id, value), table, where)
        model.set(id, value)
        break
      }
      case 2:
        assert.equal(table.delete(id), model.delete(id), where)
        break
      case 3:
        assert.equal(table.get(id), model.get(id), where)
        assert.equal(table.has(id), model.has(id), where)
        break
      case 4:
        assert.deepEqual([...table], [...model], where)
        break
    }
    assert.equal(table.size, model.size, where)
  }
})

test('PendingRequests answers as a Map does with the driver\'s own rising ids, waiting long and leaving out of order', () => {
  // The shape of a busy roster (issue 15, b): ids r1, r2 ... set in rising order and
  // mostly deleted oldest first, some left waiting long, some deleted out of order,
  // with callers' own ids among them (some that look like the driver's, some not).
  const { seed, random } = seeded('pending queue')
  const table = new PendingRequests()
  const model = new Map()
  const odd = ['r05', 'r', 'x7', 'r1e3', 'R9', 'r-1', 'r99999999999999999', '', '12', 'r00', 12, null]
  let seq = 0
  for (let step = 0; step < 40_000; step += 1) {
    const where = `step ${step}, seed ${seed}`
    const live = [...model.keys()]
    // A copy of a held id, as the core's answers name a request with a string of their own.
    const held = () => (live.length === 0 ? `r${seq}` : `${live[random(live.length)]}`.slice(0))
    switch (random(10)) {
      case 0:
      case 1:
      case 2: {
        const id = random(8) === 0 ? (random(2) === 0 ? odd[random(odd.length)] : `r${seq + 1 + random(5)}`) : `r${++seq}`
        const value = { step }
        assert.equal(table.set(id, value), table, where)
        model.set(id, value)
        break
      }
      case 3:
      case 4: {
        // The oldest, as a FIFO grant takes it (most of the time).
        const id = live.length > 0 && random(4) > 0 ? live[0] : held()
        assert.equal(table.delete(id), model.delete(id), where)
        break
      }
      case 5: {
        const id = held()
        assert.equal(table.delete(id), model.delete(id), where)
        break
      }
      case 6:
      case 7: {
        const id = random(3) === 0 ? `r${random(seq + 2)}` : held()
        assert.equal(table.get(id), model.get(id), where)
        assert.equal(table.has(id), model.has(id), where)
        break
      }
      case 8: {
        const id = held()
        const value = { again: step }
        table.set(id, value)
        model.set(id, value)
        break
      }
      case 9:
        if (random(20) === 0) assert.deepEqual([...table], [...model], where)
        break
    }
    assert.equal(table.size, model.size, where)
  }
  assert.deepEqual([...table], [...model], `the end, seed ${seed}`)
})

test("PendingRequest's promise settles as a promise whose resolvers got the same calls", async () => {
  const { seed, random } = seeded('pending request')
  const outcome = (promise) => promise.then((value) => ({ resolved: value }), (error) => ({ rejected: error }))
  const unsettled = Symbol('unsettled')
  // Whether a promise is settled, and how, after the microtasks queued so far.
  const peek = async (promise) => {
    const seen = await Promise.race([outcome(promise), new Promise((resolve) => setImmediate(() => resolve(unsettled)))])
    return seen
  }
  for (let run = 0; run < 300; run += 1) {
    const where = `run ${run}, seed ${seed}`
    const request = new PendingRequest('lease', 'coder', undefined, undefined, { now: 0 })
    let resolveReference
    let rejectReference
    const reference = new Promise((resolve, reject) => {
      resolveReference = resolve
      rejectReference = reject
    })
    reference.catch(() => {})
    // Up to three settlements, the promise asked for before, between or after them.
    const calls = Array.from({ length: random(4) }, () => ({ reject: random(2) === 0, value: { n: random(1000) } }))
    const askAt = random(calls.length + 1)
    let promise
    for (let i = 0; i <= calls.length; i += 1) {
      if (i === askAt) {
        promise = request.promise()
        promise.catch(() => {})
      }
      if (i === calls.length) break
      const { reject, value } = calls[i]
      if (reject) {
        request.reject(value)
        rejectReference(value)
      } else {
        request.resolve(value)
        resolveReference(value)
      }
    }
    assert.ok(promise instanceof Promise, where)
    assert.deepStrictEqual(await peek(promise), await peek(reference), where)
  }
})
