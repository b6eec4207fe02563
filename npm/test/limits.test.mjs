// The bounds of rota_core::limits at the JS boundary: numbers JSON cannot carry (NaN,
// the infinities) are INVALID_INPUT naming the field, never an absent field;
// fractions and negatives are INVALID_INPUT; options out of range are
// INVALID_OPTIONS; ids and labels have a length; the driver's clock is checked.
// Every refusal leaves the policy as it was.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Policy, Roster, RotaError } from 'rota'
import { START, document, executor, rejection, thrown } from './helpers.mjs'

const roster = () => document(executor('a', { slots: 2 }))

/** `policy.handle(input)` must throw `code` with `needle` in its message, changing nothing. */
function refuses(policy, input, code, needle) {
  const before = JSON.stringify(policy.exportState())
  const error = thrown(() => policy.handle(input))
  assert.ok(error instanceof RotaError, `${JSON.stringify(input)}: ${error}`)
  assert.equal(error.code, code, error.message)
  if (needle !== undefined) assert.ok(error.message.includes(needle), `${error.message} lacks ${needle}`)
  assert.equal(JSON.stringify(policy.exportState()), before, 'a refused input changed the state')
  return error
}

const lease = (fields = {}) => ({ type: 'lease', now: START, id: 'r1', role: 'coder', ...fields })

// Every numeric field of the inputs `handle` takes, in an input that is otherwise valid.
const NUMERIC = [
  ['now', (v) => lease({ now: v }), 'lease'],
  ['rank', (v) => lease({ rank: v }), 'lease'],
  ['deadline', (v) => lease({ deadline: v }), 'lease'],
  ['eventTime', (v) => lease({ eventTime: v }), 'lease'],
  ['now', (v) => ({ type: 'tryLease', now: v, id: 'r1', role: 'coder' }), 'tryLease'],
  ['now', (v) => ({ type: 'tick', now: v }), 'tick'],
  ['lease', (v) => ({ type: 'release', now: START, lease: v }), 'release'],
  ['until', (v) => ({ type: 'exclude', now: START, executor: 'a', kind: 'manual', until: v }), 'exclude'],
  ['failure.resetAt', (v) => ({ type: 'report', now: START, executor: 'a', failure: { kind: 'usageLimit', message: 'x', resetAt: v } }), 'report'],
  ['failure.retryAfterMs', (v) => ({ type: 'report', now: START, executor: 'a', failure: { kind: 'rateLimit', message: 'x', retryAfterMs: v } }), 'report'],
]

test('NaN and the infinities in every numeric field are INVALID_INPUT naming the field', () => {
  const policy = new Policy(roster())
  for (const [field, make, type] of NUMERIC) {
    for (const value of [NaN, Infinity, -Infinity]) {
      const error = refuses(policy, make(value), 'INVALID_INPUT')
      assert.equal(error.message, `invalid input: ${type}: \`${field}\` is ${value}, a number JSON cannot carry`)
    }
  }
  // In a list too (avoid holds strings: a number there is named by its place).
  const error = refuses(policy, lease({ avoid: ['b', NaN] }), 'INVALID_INPUT')
  assert.equal(error.message, 'invalid input: lease: `avoid[1]` is NaN, a number JSON cannot carry')
  // `null` itself is still an absent optional field.
  assert.equal(policy.handle(lease({ rank: null, deadline: null })).outputs[0].type, 'granted')
  policy.free()
})

test('fractions and negatives in every numeric field are INVALID_INPUT', () => {
  const policy = new Policy(roster())
  for (const [field, make] of NUMERIC) {
    const values = field === 'rank' ? [1.5, -0.5] : [1.5, -1, START + 0.25]
    for (const value of values) refuses(policy, make(value), 'INVALID_INPUT')
  }
  // A negative rank is a rank (lower first), as a whole number.
  assert.equal(policy.handle(lease({ rank: -3 })).outputs[0].type, 'granted')
  policy.free()
})

test('numbers beyond 2^53 - 1 are refused naming the field; at the bound they are taken', () => {
  const policy = new Policy(roster())
  refuses(policy, lease({ deadline: 2 ** 53 }), 'INVALID_INPUT', 'lease: `deadline` is beyond what a JSON number holds exactly')
  refuses(policy, lease({ rank: -(2 ** 53) }), 'INVALID_INPUT', 'lease: `rank` is beyond')
  const answer = policy.handle(lease({ deadline: Number.MAX_SAFE_INTEGER, rank: -Number.MAX_SAFE_INTEGER, eventTime: Number.MAX_SAFE_INTEGER }))
  assert.equal(answer.outputs[0].type, 'granted')
  policy.free()
})

test('ids and labels at their bound are taken and one byte more is refused, on both paths', () => {
  const policy = new Policy(roster())
  refuses(policy, lease({ id: 'i'.repeat(1_025) }), 'INVALID_INPUT', 'lease: `id` is 1025 bytes long; the most is 1024')
  // Bytes of UTF-8, not UTF-16 units: 513 'é' are 1,026 bytes.
  refuses(policy, lease({ id: '\u00e9'.repeat(513) }), 'INVALID_INPUT', '`id` is 1026 bytes long')
  refuses(policy, lease({ label: 'l'.repeat(4_097) }), 'INVALID_INPUT', '`label` is 4097 bytes long; the most is 4096')
  // The JSON step words the same refusal.
  const text = JSON.parse(policy.handleJson(JSON.stringify(lease({ id: 'i'.repeat(1_025) }))))
  assert.equal(text.error.message, 'invalid input: lease: `id` is 1025 bytes long; the most is 1024')
  assert.equal(policy.handle(lease({ id: 'i'.repeat(1_024), label: 'l'.repeat(4_096) })).outputs[0].type, 'granted')
  policy.free()
})

test('options out of range are INVALID_OPTIONS naming the option and its range', () => {
  for (const name of ['healthProbeIntervalMs', 'idleProbeIntervalMs', 'rateLimitWindowMs', 'provisionFirstPauseMs', 'provisionMaxPauseMs']) {
    for (const value of [Number.MAX_SAFE_INTEGER, 0, 604_800_001]) {
      const error = thrown(() => new Policy(roster(), { [name]: value }))
      assert.ok(error instanceof RotaError)
      assert.equal(error.code, 'INVALID_OPTIONS')
      assert.equal(error.message, `invalid options: \`${name}\` is ${value}; it must be from 1 to 604800000`)
    }
    // The pauses are a pair (the most not below the first): both at the bound.
    const at = name.startsWith('provision') ? { provisionFirstPauseMs: 604_800_000, provisionMaxPauseMs: 604_800_000 } : { [name]: 604_800_000 }
    new Policy(roster(), at).free()
  }
  const error = thrown(() => new Policy(roster(), { rateLimitsToExclude: 0 }))
  assert.equal(error.code, 'INVALID_OPTIONS')
  const pair = thrown(() => new Policy(roster(), { provisionFirstPauseMs: 60_000, provisionMaxPauseMs: 30_000 }))
  assert.equal(pair.code, 'INVALID_OPTIONS')
  assert.equal(pair.message, 'invalid options: `provisionMaxPauseMs` is 30000, below `provisionFirstPauseMs` (60000): the pause doubles from the first up to the most')
})

test("the driver's clock must give whole epoch milliseconds: anything else is INVALID_INPUT naming it", async () => {
  for (const [value, shown] of [[NaN, 'NaN'], [Infinity, 'Infinity'], [-Infinity, '-Infinity'], [1.5, '1.5'], [-1, '-1'], [2 ** 53, String(2 ** 53)], ['soon', 'string'], [undefined, 'undefined']]) {
    const error = await rejection(Roster.create({ document: roster(), now: () => value, probe: false }))
    assert.ok(error instanceof RotaError, String(error))
    assert.equal(error.code, 'INVALID_INPUT')
    assert.ok(error.message.startsWith(`invalid input: the clock (options.now) gave ${shown};`), error.message)
  }
  // A clock that goes bad later: the call that reads it throws, nothing runs at epoch 0.
  let t = START
  const r = await Roster.create({ document: roster(), now: () => t, probe: false })
  t = NaN
  const error = await rejection(r.lease('coder'))
  assert.equal(error.code, 'INVALID_INPUT')
  assert.match(error.message, /the clock/)
  t = START
  const held = await r.lease('coder')
  assert.equal(r.snapshot().now, START)
  held.release()
  r.close()
})
