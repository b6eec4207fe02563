// The raw Policy class and the document utilities, as exported by the package.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  ERROR_CODES,
  Policy,
  RotaError,
  coreVersion,
  defaultOptions,
  defaultRoles,
  formatDuration,
  merge,
  narrow,
  parseDuration,
  validate,
  check,
  redact,
} from 'rota'
import { START, document, executor, thrown } from './helpers.mjs'

const roster = document(
  executor('a', { roles: ['coder', 'planner'], slots: 2, health: 'http://127.0.0.1:9/health' }),
  executor('b', { harness: 'claude', priority: { coder: 2, default: 1 } }),
)

test('handle returns the drained outputs and the next wake-up in one call', () => {
  const policy = new Policy(roster)
  const first = policy.handle({ type: 'lease', now: START, id: 'r1', role: 'coder' })
  assert.deepEqual(Object.keys(first).sort(), ['outputs', 'wakeAt'])
  const granted = first.outputs.find((o) => o.type === 'granted')
  assert.equal(granted.executor, 'a', 'lowest priority first')
  assert.equal(granted.request, 'r1')
  assert.ok(first.outputs.some((o) => o.type === 'event' && o.name === 'granted'))
  assert.equal(first.wakeAt, null)

  policy.handle({ type: 'lease', now: START, id: 'r2', role: 'coder' })
  const waiting = policy.handle({ type: 'lease', now: START, id: 'r3', role: 'coder', deadline: START + 5_000 })
  assert.equal(waiting.outputs[0].type, 'waiting')
  assert.equal(waiting.wakeAt, START + 5_000)
  assert.equal(policy.wakeAt, START + 5_000)
  assert.equal(policy.now, START)

  const late = policy.handle({ type: 'tick', now: START + 5_000 })
  assert.deepEqual(late.outputs[0], { type: 'timedOut', request: 'r3', reasons: ['a busy', 'b busy'] })
})

test('handle and handleJson give the same answer; handleJson is the core text', () => {
  const trace = [
    { type: 'lease', now: START, id: 'r1', role: 'coder', label: 'story 1' },
    { type: 'lease', now: START, id: 'r2', role: 'coder' },
    { type: 'lease', now: START + 1, id: 'r3', role: 'coder', rank: 1 },
    { type: 'report', now: START + 2, executor: 'a', failure: { kind: 'outage', message: 'ECONNREFUSED' } },
    { type: 'release', now: START + 3, lease: 2 },
    { type: 'probeResult', now: START + 4, executor: 'a', up: true },
    { type: 'exclude', now: START + 5, executor: 'b', reason: 'maintenance', until: START + 60_000 },
    { type: 'tick', now: START + 60_000 },
  ]
  const objects = new Policy(roster)
  const texts = new Policy(roster)
  for (const input of trace) {
    const fromObject = objects.handle(input)
    const text = texts.handleJson(JSON.stringify(input))
    assert.deepEqual(fromObject, JSON.parse(text), `same answer to ${input.type}`)
    // The core's canonical text: fields in declaration order, `type` first.
    assert.equal(JSON.stringify(fromObject), text, `same bytes, same key order, for ${input.type}`)
  }
  assert.deepEqual(objects.snapshot(), texts.snapshot())
  const bad = JSON.parse(texts.handleJson('{"type":"lease","now":1}'))
  assert.equal(bad.error.code, 'INVALID_INPUT')
  assert.equal(JSON.parse(texts.handleJson('not json')).error.code, 'INVALID_INPUT')
})

test('queries: snapshot, available, slots, canEverServe, explain, plan, document', () => {
  const policy = new Policy(roster)
  assert.equal(policy.slots('coder'), 2, 'a: coderSlots default slots - 1 = 1, b: 1')
  assert.equal(policy.available('coder'), 2)
  assert.equal(policy.canEverServe('planner'), true)
  assert.equal(policy.canEverServe('planner', ['a']), false)
  assert.equal(policy.canEverServe('judge'), false)
  const snapshot = policy.snapshot()
  assert.deepEqual(
    snapshot.executors.map((e) => [e.id, e.slots, e.busy]),
    [
      ['a', 2, 0],
      ['b', 1, 0],
    ],
  )
  assert.deepEqual(snapshot.roles, defaultRoles())
  const why = policy.explain({ role: 'planner', avoid: ['a'] })
  assert.equal(why.canEverServe, false)
  assert.ok(why.executors.find((e) => e.id === 'b').reasons.length > 0)
  const plan = policy.plan(document(executor('a'), executor('c')))
  assert.deepEqual(plan.added, ['c'])
  assert.deepEqual(policy.document(), roster)
})

test('exportState / importState carry every lease and waiter', () => {
  const policy = new Policy(roster)
  policy.handle({ type: 'lease', now: START, id: 'r1', role: 'coder' })
  policy.handle({ type: 'lease', now: START, id: 'r2', role: 'coder' })
  policy.handle({ type: 'lease', now: START, id: 'r3', role: 'coder' })
  const copy = Policy.importState(policy.exportState())
  assert.deepEqual(copy.snapshot(), policy.snapshot())
  const a = policy.handle({ type: 'release', now: START + 1, lease: 1 })
  const b = copy.handle({ type: 'release', now: START + 1, lease: 1 })
  assert.deepEqual(b, a)
  const error = thrown(() => Policy.importState({ nonsense: true }))
  assert.equal(error.code, 'INVALID_STATE')
})

test('clone() is a copy in the same state that steps on its own', () => {
  const policy = new Policy(roster)
  policy.handle({ type: 'lease', now: START, id: 'r1', role: 'coder' })
  policy.handle({ type: 'lease', now: START, id: 'r2', role: 'coder' })
  const copy = policy.clone()
  assert.equal(copy.stateHash(), policy.stateHash())
  assert.deepEqual(copy.exportState(), policy.exportState())
  const a = policy.handle({ type: 'release', now: START + 1, lease: 1 })
  assert.notEqual(copy.stateHash(), policy.stateHash(), 'a step on the original leaves the copy as it was')
  assert.deepEqual(copy.handle({ type: 'release', now: START + 1, lease: 1 }), a)
  assert.equal(copy.stateHash(), policy.stateHash())
  copy.free()
  assert.equal(policy.snapshot().executors.reduce((n, x) => n + x.busy, 0), 1, 'freeing the copy leaves the original')
})

test('a bad document throws INVALID_DOCUMENT with every violation at once', () => {
  const error = thrown(
    () =>
      new Policy({
        executors: [
          { id: 'a', harness: 'pi', roles: ['coder', 'chef'], slots: 0 },
          { id: 'a', harness: '', roles: [] , cooldown: { outage: 'soon' } },
        ],
      }),
  )
  assert.ok(error instanceof Error)
  assert.ok(error instanceof RotaError)
  assert.equal(error.code, 'INVALID_DOCUMENT')
  assert.equal(error.name, 'RotaError')
  const paths = error.violations.map((v) => v.path)
  for (const path of ['executors[0].roles', 'executors[0].slots', 'executors[1].id', 'executors[1].harness', 'executors[1].cooldown.outage']) {
    assert.ok(paths.includes(path), `violation at ${path} in ${paths.join(', ')}`)
  }
  assert.match(error.message, /listed twice/)
  const options = thrown(() => new Policy(roster, { canProbe: 'yes' }))
  assert.equal(options.code, 'INVALID_INPUT')
})

test('document utilities: validate, merge, narrow, parseDuration, formatDuration', () => {
  assert.deepEqual(validate(roster), [])
  const violations = validate({ executors: [{ id: 'x', harness: 'pi', roles: ['coder'], kind: 'vm' }] }, ['docker'])
  assert.equal(violations.length, 1)
  assert.equal(violations[0].path, 'executors[0].kind')

  const user = document(executor('a'), executor('b'), executor('c'))
  const repo = { executors: [{ ...executor('b'), model: 'big' }, { id: 'c', disabled: true }, executor('d')] }
  const merged = merge(user, repo)
  assert.deepEqual(
    merged.executors.map((e) => [e.id, e.model]),
    [
      ['a', undefined],
      ['b', 'big'],
      ['d', undefined],
    ],
  )
  assert.deepEqual(merge(null, repo).executors.map((e) => e.id), ['b', 'd'])
  assert.deepEqual(narrow(merged, ['d', 'a']).executors.map((e) => e.id), ['a', 'd'])
  assert.deepEqual(narrow(merged, 'a, d').executors.map((e) => e.id), ['a', 'd'])
  assert.deepEqual(narrow(merged, []).executors.length, 3)
  // An unknown id is ignored, as the seed's narrowRoster does (issue 13); the driver
  // warns (narrowIgnored), see roster.test.mjs.
  assert.deepEqual(narrow(merged, ['zz', 'a']).executors.map((e) => e.id), ['a'])
  assert.deepEqual(narrow(merged, ['zz']).executors, [])
  assert.equal(thrown(() => merge({ nope: 1 }, null)).code, 'INVALID_DOCUMENT')

  // A literal secret in env: a warning beside the violations, the document valid;
  // redact keeps references only (issue 13 item 5).
  const secret = document(executor('s', { env: { ANTHROPIC_API_KEY: 'sk-ant-api03-0123456789abcdef', REF: '${HOME}' } }))
  const checked = check(secret)
  assert.deepEqual(checked.violations, [])
  assert.deepEqual(checked.warnings.map((w) => w.path), ['executors[0].env.ANTHROPIC_API_KEY'])
  assert.deepEqual(validate(secret), [])
  assert.deepEqual(redact(secret).executors[0].env, { ANTHROPIC_API_KEY: '[redacted]', REF: '${HOME}' })

  assert.equal(parseDuration('30 minutes'), 1_800_000)
  assert.equal(parseDuration('90s'), 90_000)
  assert.equal(parseDuration('2h'), 7_200_000)
  assert.equal(parseDuration('soon'), undefined)
  assert.equal(parseDuration(42), undefined)
  assert.equal(formatDuration(600_000), '10 minutes')
  assert.equal(defaultOptions().healthProbeIntervalMs, 15_000)
  assert.equal(typeof coreVersion, 'string')
  assert.ok(ERROR_CODES.includes('INVALID_DOCUMENT') && ERROR_CODES.includes('EXHAUSTED'))
})

test('undefined fields are absent, as JSON.stringify writes them', () => {
  const policy = new Policy(roster, undefined)
  const step = policy.handle({ type: 'lease', now: START, id: 'r1', role: 'coder', avoid: undefined, rank: undefined })
  assert.equal(step.outputs[0].type, 'granted')
})

test('handle throws the core error for a rejected input, word for word as handleJson says it', () => {
  const policy = new Policy(roster, { canProbe: false })
  for (const input of [
    { type: 'lease', now: START, id: 'r1', role: 'welder' },
    { type: 'lease', now: START, id: 'r1', role: 'coder', colour: 'red' },
    { type: 'release', now: START },
    { now: START },
    null,
    undefined,
  ]) {
    const error = thrown(() => policy.handle(input))
    const expected = JSON.parse(policy.handleJson(JSON.stringify(input) ?? 'null')).error
    assert.ok(error instanceof RotaError && error instanceof Error)
    assert.equal(error.name, 'RotaError')
    assert.equal(error.code, expected.code)
    assert.equal(error.message, expected.message)
  }
  const bigint = thrown(() => policy.handle({ type: 'tick', now: 10n }))
  assert.equal(bigint.code, 'INVALID_INPUT')
  assert.match(bigint.message, /cannot be written as JSON/)
  const fn = thrown(() => policy.handle(() => {}))
  assert.equal(fn.code, 'INVALID_INPUT')
  assert.match(fn.message, /not a JSON value/)
  // A rejected input changed nothing.
  assert.equal(policy.handle({ type: 'lease', now: START, id: 'r1', role: 'coder' }).outputs[0].lease, 1)
})

test('minEventLevel leaves out the events below it, and nothing else', () => {
  assert.equal(defaultOptions().minEventLevel, 'debug')
  const trace = [
    { type: 'lease', now: START, id: 'r1', role: 'coder' },
    { type: 'tryLease', now: START, id: 'r2', role: 'reviewer' },
    { type: 'report', now: START + 1, executor: 'a', failure: { kind: 'outage', message: 'refused' } },
    { type: 'release', now: START + 2, lease: 1 },
  ]
  const run = (options) => {
    const policy = new Policy(roster, options)
    return trace.map((input) => policy.handle(input))
  }
  const all = run({ canProbe: false })
  const rank = { debug: 0, info: 1, warn: 2 }
  for (const min of ['debug', 'info', 'warn']) {
    const expected = all.map(({ outputs, wakeAt }) => ({
      outputs: outputs.filter((o) => o.type !== 'event' || rank[o.level] >= rank[min]),
      wakeAt,
    }))
    assert.deepEqual(run({ canProbe: false, minEventLevel: min }), expected)
  }
  const quiet = new Policy(roster, { canProbe: false, minEventLevel: 'warn' })
  assert.deepEqual(quiet.handle(trace[0]).outputs.map((o) => o.type), ['granted'])
  assert.equal(JSON.stringify(quiet.exportState().options.minEventLevel), '"warn"')
  assert.equal(thrown(() => new Policy(roster, { minEventLevel: 'loud' })).code, 'INVALID_INPUT')
})
