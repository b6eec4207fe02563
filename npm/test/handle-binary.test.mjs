// `Policy#handle` takes a binary step for the common inputs (src/binary.js) and the
// JSON step for the rest: its answers and errors must be exactly those of
// `JSON.parse(policy.handleJson(JSON.stringify(input)))`, for every input. Random input
// sequences (odd and invalid ones included) go through two policies built alike, one
// through `handle`, one through the JSON step; every answer must be deep-equal, with
// the same keys in the same order, and every error the same `code` and message.
//
// The seed is printed; ROTA_FUZZ_SEED=<n> replays a run, ROTA_FUZZ_RUNS=<n> sets how
// many sequences. The conformance vectors' inputs (ROTA_VECTORS, tests/vectors) and
// the native random traces (ROTA_TRACES, when the file exists) go through both too.

import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Policy, RotaError } from 'rota'

const START = Date.UTC(2026, 0, 1)
/** The driver's step that may leave out events below a level (src/roster/Roster.js). */
const HANDLE_AT_LEVEL = Symbol.for('rota.handleAtLevel')
/** Its bit that leaves out the persist outputs too. */
const NO_PERSIST = 4

/** The JSON step, as `handle` was before the binary one: the reference. */
/** As api.js: the first NaN or infinity in a plain input, which JSON writes as null. */
function nonFinite(value, path) {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path, value }
  if (value === null || typeof value !== 'object' || typeof value.toJSON === 'function') return undefined
  const array = Array.isArray(value)
  for (const key of Object.keys(value)) {
    const found = nonFinite(value[key], array ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`)
    if (found !== undefined) return found
  }
  return undefined
}

function viaJson(policy, input) {
  let text
  if (input === undefined) {
    text = 'null'
  } else {
    try {
      text = JSON.stringify(input)
    } catch (error) {
      throw new RotaError('INVALID_INPUT', `invalid input: the input cannot be written as JSON (${error?.message ?? ''})`)
    }
    if (text === undefined) throw new RotaError('INVALID_INPUT', 'invalid input: the input is not a JSON value')
    const found = text.includes('null') ? nonFinite(input, '') : undefined
    if (found !== undefined) {
      const type = typeof input?.type === 'string' ? `${input.type}: ` : ''
      throw new RotaError('INVALID_INPUT', `invalid input: ${type}\`${found.path}\` is ${found.value}, a number JSON cannot carry`)
    }
  }
  const answer = JSON.parse(policy.handleJson(text))
  if (answer.error !== undefined) {
    const { error } = answer
    throw new RotaError(error.code, error.message, error.violations === undefined ? {} : { violations: error.violations })
  }
  return answer
}

const outcome = (f) => {
  try {
    return { answer: f() }
  } catch (error) {
    return { error }
  }
}

/** Deep equality, key order and -0 included (JSON text for the order, deepStrictEqual for the rest). */
function assertSame(actual, expected, where) {
  if (expected.error !== undefined || actual.error !== undefined) {
    assert.ok(actual.error !== undefined, `${where}: handle answered ${JSON.stringify(actual.answer)}, the JSON step threw ${expected.error?.message}`)
    assert.ok(expected.error !== undefined, `${where}: handle threw ${actual.error?.message}, the JSON step answered ${JSON.stringify(expected.answer)}`)
    const shape = (e) => ({ rota: e instanceof RotaError, name: e.name, code: e.code, message: e.message, violations: e.violations })
    assert.deepStrictEqual(shape(actual.error), shape(expected.error), `${where}: the errors differ`)
    return
  }
  assert.equal(JSON.stringify(actual.answer), JSON.stringify(expected.answer), `${where}: the answers differ`)
  assert.deepStrictEqual(actual.answer, expected.answer, `${where}: the answers differ`)
}

/** Two policies built alike; `step` feeds both and compares. */
function pair(document, options) {
  const made = outcome(() => new Policy(document, options))
  if (made.error !== undefined) return null
  const fast = made.answer
  const slow = new Policy(document, options)
  // The driver's step (HANDLE_AT_LEVEL at warn): the same answer without the debug
  // and info events, and the same state.
  const quiet = new Policy(document, options)
  // The step of a driver with no state file (warn | NO_PERSIST): no persist either.
  const bare = new Policy(document, options)
  let n = 0
  return {
    fast,
    slow,
    step(input, where = '') {
      n += 1
      const expected = outcome(() => viaJson(slow, input))
      const actual = outcome(() => fast.handle(input))
      assertSame(actual, expected, `${where} step ${n} (${describe(input)})`)
      const warnOnly =
        expected.answer === undefined
          ? expected
          : { answer: { ...expected.answer, outputs: expected.answer.outputs.filter((o) => o.type !== 'event' || o.level === 'warn') } }
      assertSame(outcome(() => quiet[HANDLE_AT_LEVEL](input, 2)), warnOnly, `${where} step ${n} at warn (${describe(input)})`)
      const unpersisted =
        warnOnly.answer === undefined ? warnOnly : { answer: { ...warnOnly.answer, outputs: warnOnly.answer.outputs.filter((o) => o.type !== 'persist') } }
      assertSame(outcome(() => bare[HANDLE_AT_LEVEL](input, 2 | NO_PERSIST)), unpersisted, `${where} step ${n} at warn, no persist (${describe(input)})`)
      return expected.answer
    },
    check(where) {
      assert.deepStrictEqual(fast.snapshot(), slow.snapshot(), `${where}: the snapshots differ`)
      assert.deepStrictEqual(fast.exportState(), slow.exportState(), `${where}: the exported states differ`)
      assert.deepStrictEqual(quiet.exportState(), slow.exportState(), `${where}: the exported states differ (at warn)`)
      assert.deepStrictEqual(bare.exportState(), slow.exportState(), `${where}: the exported states differ (no persist)`)
    },
    free() {
      fast.free()
      slow.free()
      quiet.free()
      bare.free()
    },
  }
}

function describe(input) {
  try {
    const text = JSON.stringify(input, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))
    return text === undefined ? String(input) : text.length > 300 ? `${text.slice(0, 300)}...` : text
  } catch {
    return String(input)
  }
}

// ---- random sequences ----------------------------------------------------------------

function mulberry32(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const seed = process.env.ROTA_FUZZ_SEED !== undefined ? Number(process.env.ROTA_FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31)
const runs = Number(process.env.ROTA_FUZZ_RUNS ?? 60)

function generator(random) {
  const int = (n) => Math.floor(random() * n)
  const pick = (list) => list[int(list.length)]
  const chance = (p) => random() < p
  const ids = ['a', 'b', 'c', 'vm', 'h', 'e\u00e9', 'ghost']
  const roles = ['coder', 'planner', 'reviewer', 'judge', 'nope']
  const strings = [
    'x',
    '',
    'story-1',
    'caf\u00e9',
    '\u{1f600} emoji',
    'quote " and \\ backslash',
    'line\nbreak\ttab\u0001',
    '\ufeffbom first',
    'lone \ud800 surrogate',
    'x'.repeat(127),
    'y'.repeat(128),
    'z'.repeat(5000),
    '\u00e9'.repeat(300),
  ]
  const text = () => (chance(0.6) ? pick(['r', 's', 'label', 'msg']) + int(40) : pick(strings))
  const document = () => {
    const executors = [
      { id: 'a', harness: 'pi', roles: ['coder', 'planner'], slots: 1 + int(3), health: 'http://127.0.0.1:9/health' },
      { id: 'b', harness: 'claude', roles: ['coder', 'reviewer'], slots: 1 + int(2), priority: { coder: 2, default: 1 } },
      { id: 'c', harness: 'codex', roles: ['reviewer', 'judge'], slots: 1, cooldown: { rateLimit: '90s' } },
    ]
    if (chance(0.5)) executors.push({ id: 'vm', harness: 'codex', roles: ['coder'], provision: true, maxConcurrentAttempts: 2 })
    if (chance(0.5)) executors.push({ id: 'e\u00e9', harness: 'pi', roles: ['coder'], slots: 2, model: 'm\u00e9' })
    return { executors }
  }
  const options = () => {
    const o = {}
    if (chance(0.7)) o.minEventLevel = pick(['debug', 'info', 'warn'])
    if (chance(0.3)) o.canProbe = chance(0.5)
    if (chance(0.2)) o.preflightReloads = true
    return chance(0.1) ? undefined : o
  }
  let now = START
  const time = () => {
    if (chance(0.3)) now += int(chance(0.2) ? 3_600_000 : 60_000)
    return chance(0.03) ? now - int(10_000) : now
  }
  const number = () =>
    pick([0, 1, 7, 42, -1, -0, 1.5, NaN, Infinity, 2 ** 53, 2 ** 53 - 1, 1e21, 2 ** 32, 2 ** 31 - 1, '5', null, now, now + int(600_000)])
  const leaseIds = []
  const requestIds = []
  const failure = () => {
    // Either a kind the host decided or only the facts it found (as `failureFacts` gives them).
    const f = chance(0.5) ? { kind: pick(['usageLimit', 'rateLimit', 'authentication', 'outage', 'modelUnavailable', 'other']) } : {}
    if (chance(0.3)) f.tag = pick(['RateLimitError', 'UsageLimitError', 'AuthenticationError', 'ProviderError', 'OtherError', text()])
    if (chance(0.4)) f.status = pick([429, 401, 403, 500, 503, 100, 599])
    if (chance(0.2)) f.code = pick(['ECONNREFUSED', 'engine_recovering', text()])
    if (chance(0.7)) f.message = pick(['429 too many', 'model not found', 'usage limit reached', 'engine is recovering', 'quota per minute', text()])
    if (chance(0.2)) f.resetAt = now + int(3_600_000)
    if (chance(0.2)) f.retryAfterMs = int(600_000)
    if (chance(0.05)) f.resetAt = null
    if (chance(0.05)) f.message = undefined
    return f
  }
  const input = () => {
    const t = time()
    switch (int(16)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const id = chance(0.1) && requestIds.length > 0 ? pick(requestIds) : `r${int(1e6)}`
        requestIds.push(id)
        const i = { type: chance(0.75) ? 'lease' : 'tryLease', now: t, id, role: pick(roles) }
        if (chance(0.2)) i.avoid = Array.from({ length: int(3) }, () => pick(ids))
        if (chance(0.1)) i.prefer = pick(ids)
        if (chance(0.05)) i.pin = pick(ids)
        if (chance(0.2)) i.rank = int(5) - 1
        if (chance(0.1)) i.eventTime = t - int(100_000)
        if (chance(0.2)) i.label = text()
        if (chance(0.15)) i.deadline = t + int(120_000)
        if (chance(0.05)) i.prefer = null
        if (chance(0.05)) i.label = undefined
        return i
      }
      case 4:
      case 5:
      case 6:
        return { type: 'release', now: t, lease: chance(0.9) && leaseIds.length > 0 ? pick(leaseIds) : int(100) }
      case 7:
        return { type: 'tick', now: t }
      case 8:
        return { type: 'cancel', now: t, id: requestIds.length > 0 && chance(0.8) ? pick(requestIds) : text() }
      case 9:
        return { type: 'report', now: t, executor: pick(ids), failure: failure() }
      case 10:
        return chance(0.5) ? { type: 'resume', now: t, executor: pick(ids) } : { type: 'probeResult', now: t, executor: pick(ids), up: chance(0.5) }
      case 11: {
        // The inputs the binary step leaves to the JSON one.
        switch (int(7)) {
          case 0:
            return { type: 'exclude', now: t, executor: pick(ids), kind: pick(['manual', 'until', 'run', 'health']), reason: text(), until: t + int(600_000) }
          case 1:
            return { type: 'occupy', now: t, id: `o${int(100)}`, executor: pick(ids), role: pick(roles), hold: chance(0.5) ? { machine: text(), n: int(9) } : undefined }
          case 2:
            return { type: 'machineCreated', now: t, id: pick(requestIds.length > 0 ? requestIds : ['r1']), hold: chance(0.5) ? text() : { vm: int(9), list: [1, 'two', null] } }
          case 3:
            return { type: 'machineFailed', now: t, id: pick(requestIds.length > 0 ? requestIds : ['r1']), message: text() }
          case 4:
            return { type: 'preflightResult', now: t, executor: pick(ids), ok: chance(0.5), error: chance(0.5) ? text() : undefined }
          case 5:
            return { type: 'restore', now: t, state: { version: 1, exclusions: [{ id: pick(ids), reason: 'r', kind: 'until', until: t + 60_000 }] } }
          default:
            return { type: 'reload', now: t, document: document() }
        }
      }
      default:
        return odd(t)
    }
  }
  // Inputs that must fall back (or be refused exactly as the JSON step refuses them).
  const odd = (t) => {
    const base = { type: pick(['lease', 'tryLease', 'release', 'tick', 'cancel', 'report', 'resume', 'probeResult']), now: t, id: `q${int(100)}`, role: 'coder' }
    if (base.type === 'release') (delete base.id, delete base.role, (base.lease = int(5)))
    if (base.type === 'report') (delete base.id, delete base.role, (base.executor = 'a'), (base.failure = failure()))
    if (base.type === 'resume' || base.type === 'probeResult') (delete base.id, delete base.role, (base.executor = 'b'))
    if (base.type === 'probeResult') base.up = true
    if (base.type === 'tick') (delete base.id, delete base.role)
    if (base.type === 'cancel') delete base.role
    const fields = Object.keys(base)
    switch (int(22)) {
      case 0: return { ...base, extra: 1 }
      case 1: return { ...base, now: number() }
      case 2: return { ...base, [pick(fields)]: number() }
      case 3: return { ...base, [pick(fields)]: null }
      case 4: return { ...base, [pick(fields)]: undefined }
      case 5: return { ...base, [pick(fields)]: pick([true, [], {}, 'text', [1], ['a']]) }
      case 6: return { ...base, type: pick(['Lease', 'toString', '__proto__', 'constructor', 'exclude', '', 7]) }
      case 7: return { ...base, avoid: pick([null, 'a', ['a', 1], [undefined], [, 'a'], ['a', 'b'], new Array(3)]) } // eslint-disable-line no-sparse-arrays
      case 8: return { ...base, rank: pick([-5, 2 ** 53, -(2 ** 53), 0.5, -0, '1']) }
      case 9: return { ...base, eventTime: new Date(t) }
      case 10: return Object.assign(Object.create({ inherited: 1 }), base)
      case 11: return Object.assign(Object.create(null), base)
      case 12: return { ...base, toJSON: () => ({ type: 'tick', now: t }) }
      case 13: return pick([null, undefined, 42, 'lease', [], [base], true])
      case 14: return { ...base, now: 10n }
      case 15: return { ...base, label: () => 1 }
      case 16: return { ...base, failure: pick([null, 'x', { kind: 'nope' }, { kind: 'other', extra: 1 }, { kind: 'other', message: 5 }, { kind: 'other', resetAt: -1 }, { kind: 'outage', message: null }, { status: 600 }, { status: 99 }, { status: 429.5 }, { status: '429' }, { tag: 5 }, { code: false }, { tag: null, code: null, status: null, kind: null }, { message: 'x', headers: {} }]) }
      case 17: {
        const { type, ...rest } = base
        return chance(0.5) ? rest : { ...rest, type }
      }
      case 18: return { ...base, up: pick([1, 'true', null, false]) }
      case 19: return { ...base, id: pick(strings), role: pick([...roles, 'caf\u00e9', '']) }
      case 20: return { ...base, label: pick(strings), prefer: pick(strings) }
      default: return new (class Input { constructor() { Object.assign(this, base) } })()
    }
  }
  return {
    document,
    options,
    input,
    granted(answer) {
      for (const o of answer?.outputs ?? []) if (o.type === 'granted') leaseIds.push(o.lease)
    },
  }
}

test(`handle answers as the JSON step on random sequences (seed ${seed}; ROTA_FUZZ_SEED=${seed} replays)`, () => {
  console.log(`# handle vs handleJson: seed ${seed}, ${runs} sequences (ROTA_FUZZ_SEED=${seed} replays)`)
  const random = mulberry32(seed)
  let steps = 0
  for (let run = 0; run < runs; run += 1) {
    const g = generator(random)
    const p = pair(g.document(), g.options())
    assert.ok(p !== null, 'the document is valid')
    const length = 50 + Math.floor(random() * 250)
    for (let i = 0; i < length; i += 1) {
      const answer = p.step(g.input(), `seed ${seed}, sequence ${run + 1}`)
      g.granted(answer)
      steps += 1
    }
    p.check(`seed ${seed}, sequence ${run + 1}`)
    p.free()
  }
  assert.ok(steps > runs * 50)
})

test('the executor table (names by place) follows a reload that renames, reorders and drops executors', () => {
  const executors = (ids) => ids.map((id) => ({ id, harness: 'pi', roles: ['coder'], slots: 1 }))
  const p = pair({ executors: executors(['e0', 'e1', 'e2']) }, { canProbe: false })
  let now = START
  const cycle = (where, slots) => {
    // Lease every slot (each grant names its executor by place), then release them.
    const leases = []
    for (let i = 0; i < slots; i += 1) {
      const answer = p.step({ type: 'lease', now: (now += 1), id: `${where}-${i}`, role: 'coder' }, where)
      for (const o of answer.outputs) if (o.type === 'granted') leases.push(o.lease)
    }
    for (const lease of leases) p.step({ type: 'release', now: (now += 1), lease }, where)
    return leases.length
  }
  assert.equal(cycle('first', 3), 3)
  // Other names at the same places, one place fewer, then one more: every grant and
  // release must name the executor the JSON step names, not the table's old entry.
  for (const ids of [['e2', 'x', 'e0'], ['y', 'e2'], ['e2', 'y', 'z', 'e0']]) {
    p.step({ type: 'reload', now: (now += 1), document: { executors: executors(ids) } }, `reload to ${ids}`)
    assert.equal(cycle(`after ${ids}`, ids.length), ids.length)
    p.check(`after ${ids}`)
  }
  p.free()
})

test('handle grows its buffer for long inputs and many outputs, and after the memory grows', () => {
  const executors = Array.from({ length: 300 }, (_, i) => ({ id: `x${i}-${'w'.repeat(i % 50)}`, harness: 'pi', roles: ['coder'], slots: 1 }))
  const p = pair({ executors }, { minEventLevel: 'debug' })
  // The longest id and label the core takes (rota_core::limits), and one past each.
  const long = 'L'.repeat(1_024)
  p.step({ type: 'lease', now: START, id: `${long}L`, role: 'coder' })
  p.step({ type: 'lease', now: START, id: 'r', role: 'coder', label: '\u00e9'.repeat(2_049) })
  p.step({ type: 'lease', now: START, id: long, role: 'coder', label: '\u00e9'.repeat(2_048), avoid: executors.slice(0, 200).map((x) => x.id) })
  for (let i = 0; i < 400; i += 1) p.step({ type: 'lease', now: START, id: `r${i}`, role: 'coder', label: `story ${i}` })
  // An exclusion of every executor: many outputs in one answer.
  for (let i = 0; i < 300; i += 5) p.step({ type: 'report', now: START + 1, executor: executors[i].id, failure: { kind: 'authentication', message: 'no' } })
  p.step({ type: 'tick', now: START + 10_000_000 })
  // Grow the memory (a large document), then step on: the views are renewed.
  const big = new Policy({ executors: Array.from({ length: 20_000 }, (_, i) => ({ id: `big${i}`, harness: 'pi', roles: ['coder'] })) })
  for (let i = 0; i < 50; i += 1) p.step({ type: 'release', now: START + 10_000_000, lease: i + 1 })
  big.free()
  p.check('after growing')
  p.free()
})

test('objects the JSON step reads its own way: getters, throwing getters, proxies, a polluted Object.prototype', () => {
  const p = pair({ executors: [{ id: 'a', harness: 'pi', roles: ['coder'], slots: 2 }] }, undefined)
  const lease = (id) => ({ type: 'lease', now: START, id, role: 'coder' })
  p.step(Object.defineProperty(lease('g1'), 'label', { get: () => 'from a getter', enumerable: true }))
  p.step(Object.defineProperty(lease('g2'), 'label', { get: () => 'hidden', enumerable: false }))
  p.step(Object.defineProperty(lease('g3'), 'label', { get: () => { throw new Error('boom') }, enumerable: true }))
  p.step(new Proxy(lease('g4'), {}))
  p.step(Object.defineProperty(lease('g5'), Symbol('s'), { value: 1, enumerable: true }))
  p.step({ type: 'release', now: START, lease: 1, [Symbol.toPrimitive]: () => 1 })
  Object.defineProperty(Object.prototype, 'id', { value: 'inherited', enumerable: true, configurable: true, writable: true })
  try {
    p.step({ type: 'lease', now: START, role: 'coder' })
    p.step({ type: 'cancel', now: START })
  } finally {
    delete Object.prototype.id
  }
  p.step({ type: 'cancel', now: START, id: 'g4' })
  p.check('odd objects')
  p.free()
})

test('a freed policy throws as before', () => {
  const policy = new Policy({ executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] })
  policy.free()
  assert.throws(() => policy.handle({ type: 'tick', now: START }))
})

function loadVectors(dir) {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')))
}

test('every conformance vector: handle answers as handleJson', (t) => {
  const dir = process.env.ROTA_VECTORS
  if (dir === undefined || !existsSync(dir)) return t.skip('ROTA_VECTORS (tests/vectors) is not set')
  const vectors = loadVectors(dir)
  assert.ok(vectors.length >= 60)
  let steps = 0
  for (const vector of vectors) {
    const p = pair(vector.document, vector.options ?? undefined)
    if (p === null) continue
    for (const step of vector.steps) {
      if (step.input !== undefined) p.step(step.input, `vector ${vector.name}`)
      else if (step.inputText !== undefined) {
        let input
        try {
          input = JSON.parse(step.inputText)
        } catch {
          continue
        }
        p.step(input, `vector ${vector.name}`)
      } else continue
      steps += 1
    }
    p.check(`vector ${vector.name}`)
    p.free()
  }
  assert.ok(steps > 300)
})

test('the native random traces: handle answers as handleJson', (t) => {
  const file = process.env.ROTA_TRACES
  if (file === undefined || !existsSync(file)) return t.skip('ROTA_TRACES (target/conformance/traces.json) is missing')
  // A trace holds JSON texts: the document, the options, each input (some inputs are
  // not JSON on purpose).
  const { traces } = JSON.parse(readFileSync(file, 'utf8'))
  assert.ok(traces.length > 0)
  for (const trace of traces) {
    const p = pair(JSON.parse(trace.document), JSON.parse(trace.options) ?? undefined)
    if (p === null) continue
    for (const text of trace.inputs) {
      let input
      try {
        input = JSON.parse(text)
      } catch {
        continue // not JSON on purpose: nothing for handle
      }
      p.step(input, `trace seed ${trace.seed}`)
    }
    p.check(`trace seed ${trace.seed}`)
    p.free()
  }
})

test("a report of facts takes the binary step, and events carry the core's messages", async () => {
  const here = import.meta.resolve('rota')
  const wasm = await import(new URL('../pkg/node/rota_wasm.js', here).href)
  const { binaryStep } = await import(new URL('./binary.js', here).href)
  const { step, format } = binaryStep(wasm)
  // The table binary.js took its numbers from is the module's own.
  assert.deepStrictEqual(format, JSON.parse(wasm.__wireFormat()))
  const document = { executors: [{ id: 'e0', harness: 'pi', roles: ['coder'] }, { id: 'e1', harness: 'pi', roles: ['coder'], health: 'http://127.0.0.1:9/up' }] }
  const p = pair(document, { canProbe: false })
  const reports = [
    { status: 429, message: '429 Too Many Requests', retryAfterMs: 60_000 },
    { tag: 'UsageLimitError', message: 'usage limit reached', resetAt: START + 3_600_000 },
    { code: 'engine_recovering', message: 'engine is recovering' },
    { status: 503, message: 'unavailable' },
    { kind: 'rateLimit', tag: 'RateLimitError', status: 429, code: 'E429', message: 'slow down' },
  ]
  let now = START
  for (const [i, failure] of reports.entries()) {
    const input = { type: 'report', now: (now += 1), executor: `e${i & 1}`, failure }
    // Through `step` on a third policy: an answer, not `undefined` (the JSON step).
    const probe = new Policy(document, { canProbe: false })
    assert.notEqual(step(probe, input), undefined, `${JSON.stringify(failure)} takes the binary step`)
    probe.free()
    p.step(input, `report ${i}`)
  }
  // Grants and releases: their events' messages come from the module, by place.
  const fresh = new Policy({ executors: [{ id: 'e0', harness: 'pi', roles: ['coder', 'judge'], slots: 2 }] }, { canProbe: false })
  const messages = []
  for (let i = 0; i < 6; i += 1) {
    const role = i % 3 === 2 ? 'judge' : 'coder'
    const { outputs } = step(fresh, { type: 'lease', now: START, id: `r${i}`, role })
    step(fresh, { type: 'release', now: START, lease: outputs[0].lease }).outputs.forEach((o) => messages.push(o.message))
    messages.push(outputs[1].message)
  }
  assert.deepStrictEqual(messages, ['e0\'s slot is released', 'e0 takes coder', 'e0\'s slot is released', 'e0 takes coder', 'e0\'s slot is released', 'e0 takes judge', 'e0\'s slot is released', 'e0 takes coder', 'e0\'s slot is released', 'e0 takes coder', 'e0\'s slot is released', 'e0 takes judge'])
  fresh.free()
})
