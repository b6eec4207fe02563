// The driver's own inputs skip the generic encoder's walk of their keys (binary.js
// `encodeTrusted`): for every input of the shapes the driver builds (a lease or
// tryLease from `#requestInput`, a release from `#releaseLease`, a report from
// `report()` with `failureFacts`' failure), with any values in
// them, it must write exactly the bytes `encode` writes and return what it returns
// (-1 included). And `DRIVER_STEP` must answer (and throw) as `HANDLE_AT_LEVEL` does.
//
// The seed is printed; ROTA_ENCODE_SEED=<n> replays a run.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Policy, RotaError } from 'rota'

const here = import.meta.resolve('rota')
const wasm = await import(new URL('../pkg/node/rota_wasm.js', here).href)
const { binaryStep } = await import(new URL('./binary.js', here).href)
const { encode, encodeTrusted } = binaryStep(wasm)

const HANDLE_AT_LEVEL = Symbol.for('rota.handleAtLevel')
const DRIVER_STEP = Symbol.for('rota.driverStep')
const START = Date.UTC(2026, 0, 1)

const seed = Number(process.env.ROTA_ENCODE_SEED ?? Date.now() % 1_000_000)
console.log(`# encode-trusted: seed ${seed} (ROTA_ENCODE_SEED=${seed} replays)`)
let state = seed
// An LCG's high bits (its low bits repeat with a short period).
const random = (n) => {
  state = (state * 1_103_515_245 + 12_345) % 2 ** 31
  return Math.floor((state / 2 ** 31) * n)
}
const pick = (values) => values[random(values.length)]

const STRINGS = ['', 'e0', 'e1', 'coder', 'judge', 'r1', 'a-much-longer-ascii-string-of-30', 'sixteen-chars-ab', 'é', 'naïve coder', '日本', '\u{1F600}x', '\uD800', 'x\uDC00y', '\uFEFFbom']
const NUMBERS = [0, 1, 7, START, -1, -0, 0.5, 2 ** 53 - 1, 2 ** 53, 1e300, Number.NaN, Number.POSITIVE_INFINITY, -(2 ** 40)]
const OTHERS = [null, true, false, {}, [], ['e0'], 12n]

/** Any value a caller may put in an option, weighted towards the valid ones. */
const anyValue = () => {
  switch (random(4)) {
    case 0:
    case 1:
      return pick(STRINGS)
    case 2:
      return pick(NUMBERS)
    default:
      return pick(OTHERS)
  }
}
const number = () => (random(4) === 0 ? anyValue() : pick(NUMBERS))
const string = () => (random(4) === 0 ? anyValue() : pick(STRINGS))

/** An `avoid` as `list()` passes it on: a one-string list, or the caller's array as it is. */
function avoidList() {
  switch (random(6)) {
    case 0:
      return [string()]
    case 1: {
      const odd = [pick(STRINGS)]
      if (random(2) === 0) Object.setPrototypeOf(odd, Object.create(Array.prototype))
      else odd.toJSON = () => 'x'
      return odd
    }
    case 2:
      // A hole.
      return ['e0', , 'e1'] // eslint-disable-line no-sparse-arrays
    default:
      return Array.from({ length: random(4) }, () => (random(8) === 0 ? anyValue() : pick(STRINGS)))
  }
}

/** An input as `#requestInput` builds it (its keys in its order, only the options given). */
function requestInput() {
  const input = { type: random(2) === 0 ? 'lease' : 'tryLease', now: random(8) === 0 ? number() : START + random(1000), id: random(6) === 0 ? anyValue() : `r${random(100)}`, role: string() }
  if (random(3) === 0) input.avoid = avoidList()
  if (random(4) === 0) input.prefer = string()
  if (random(4) === 0) input.pin = string()
  if (random(4) === 0) input.rank = number()
  if (random(4) === 0) input.eventTime = number()
  if (random(4) === 0) input.label = string()
  if (random(4) === 0) input.deadline = number()
  return input
}
const releaseInput = () => ({ type: 'release', now: random(8) === 0 ? number() : START + random(1000), lease: random(3) === 0 ? anyValue() : random(50) })

const KINDS = ['rateLimit', 'usageLimit', 'authentication', 'outage', 'modelUnavailable', 'other', 'RateLimit', '']
/** A failure as `failureFacts` builds it: its keys in its order, only the facts found. */
function failureFacts() {
  const facts = {}
  if (random(3) !== 0) facts.kind = random(6) === 0 ? anyValue() : pick(KINDS)
  if (random(8) === 0) facts.tag = random(2) === 0 ? 'RateLimitError' : anyValue()
  if (random(8) === 0) facts.status = random(2) === 0 ? 429 : anyValue()
  if (random(8) === 0) facts.code = random(2) === 0 ? 'ECONNREFUSED' : anyValue()
  if (random(6) !== 0) facts.message = random(6) === 0 ? anyValue() : pick(['429 Too Many Requests', ...STRINGS])
  if (random(3) === 0) facts.resetAt = number()
  if (random(3) === 0) facts.retryAfterMs = number()
  if (random(40) === 0) facts.kind = undefined
  return facts
}
/** `report()`'s input; now and then a failure that is no plain object. */
function reportInput() {
  const failure = random(30) === 0 ? pick([null, 'x', [], Object.create({ kind: 'rateLimit' }), { toJSON: () => ({}) }]) : failureFacts()
  return { type: 'report', now: random(8) === 0 ? number() : START + random(1000), executor: random(6) === 0 ? anyValue() : pick(['e0', 'e1', 'e9']), failure }
}
const driverInput = () => {
  switch (random(4)) {
    case 0: return releaseInput()
    case 1: return reportInput()
    default: return requestInput()
  }
}

const describe = (input) => {
  try {
    return JSON.stringify(input, (_, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))
  } catch {
    return String(input)
  }
}

const ioOf = (policy) => policy[Object.getOwnPropertySymbols(policy).find((s) => s.description === 'rota.io')]

/** What `encodeWith` leaves: its result and the whole buffer (filled with a marker first). */
function written(encodeWith, policy, input) {
  const before = ioOf(policy)
  new Uint8Array(wasm.__memory().buffer, before.ptr, before.size).fill(0xa5)
  let result
  try {
    result = { length: encodeWith(policy, input) }
  } catch (error) {
    result = { threw: String(error) }
  }
  const io = ioOf(policy)
  return { ...result, ptr: io.ptr, size: io.size, bytes: Buffer.from(new Uint8Array(wasm.__memory().buffer, io.ptr, io.size)).toString('hex') }
}

/** Runs `f` with Object.prototype given an enumerable key or a `toJSON`, then takes it away. */
function polluted(f) {
  const key = random(2) === 0 ? 'pollution' : 'toJSON'
  Object.defineProperty(Object.prototype, key, { value: key === 'toJSON' ? function toJSON() { return {} } : 1, enumerable: key !== 'toJSON', configurable: true, writable: true })
  try {
    return f()
  } finally {
    delete Object.prototype[key]
  }
}

const document = { executors: [{ id: 'e0', harness: 'pi', roles: ['coder'], slots: 2 }, { id: 'e1', harness: 'pi', roles: ['coder', 'judge'], slots: 1 }] }

test("encodeTrusted writes exactly encode's bytes for every input the driver builds", () => {
  const policy = new Policy(document, { canProbe: false })
  try {
    // A buffer larger than any input here: none moves it (`begin`, which both share,
    // would give a fresh one, not filled with the marker).
    encode(policy, { type: 'lease', now: START, id: 'r', role: 'x'.repeat(4_000) })
    let valid = 0
    for (let n = 0; n < 20_000; n += 1) {
      const input = driverInput()
      const where = `input ${n} (${describe(input)}), seed ${seed}`
      const odd = random(50) === 0
      const [expected, actual] = odd
        ? polluted(() => [written(encode, policy, input), written(encodeTrusted, policy, input)])
        : [written(encode, policy, input), written(encodeTrusted, policy, input)]
      assert.deepEqual(actual, expected, where)
      if (expected.length >= 0) valid += 1
    }
    // Both ways must have been tried often.
    assert.ok(valid > 5_000 && valid < 18_000, `${valid} of 20,000 inputs were encoded: the generator is off`)
  } finally {
    policy.free()
  }
})

test('DRIVER_STEP answers and throws as HANDLE_AT_LEVEL does, the same state after', () => {
  const trusted = new Policy(document, { canProbe: false })
  const generic = new Policy(document, { canProbe: false })
  const outcome = (f) => {
    try {
      return { answer: f() }
    } catch (error) {
      return { error: { rota: error instanceof RotaError, code: error.code, message: error.message } }
    }
  }
  try {
    const leases = []
    for (let n = 0; n < 5_000; n += 1) {
      let input = driverInput()
      // Mostly inputs that run: real leases released, known roles.
      if (random(2) === 0) {
        input = random(4) === 0
          ? { type: 'report', now: START + n, executor: pick(['e0', 'e1']), failure: pick([{ kind: 'rateLimit', message: '429', retryAfterMs: 1_000 + random(5_000) }, { message: 'model not found' }, { kind: 'outage', message: 'ECONNREFUSED' }, { kind: 'usageLimit', message: 'quota', resetAt: START + n + 60_000 }]) }
          : random(2) === 0 || leases.length === 0
          ? { type: pick(['lease', 'tryLease']), now: START + n, id: `q${n}`, role: pick(['coder', 'judge']) }
          : { type: 'release', now: START + n, lease: leases.splice(random(leases.length), 1)[0] }
      }
      const level = pick([0, 1, 2, 2 | 4])
      const where = `input ${n} at ${level} (${describe(input)}), seed ${seed}`
      const expected = outcome(() => generic[HANDLE_AT_LEVEL](input, level))
      const actual = outcome(() => trusted[DRIVER_STEP](input, level))
      assert.equal(JSON.stringify(actual), JSON.stringify(expected), where)
      assert.deepStrictEqual(actual, expected, where)
      for (const output of expected.answer?.outputs ?? []) if (output.type === 'granted') leases.push(output.lease)
    }
    assert.deepStrictEqual(trusted.exportState(), generic.exportState())
    assert.deepStrictEqual(trusted.snapshot(), generic.snapshot())
  } finally {
    trusted.free()
    generic.free()
  }
})
