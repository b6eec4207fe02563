// Bad input: each kind throws (or rejects with) its documented code, and nothing
// changes: the snapshot before and after is the same.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Policy, Roster, RotaError } from 'rota'
import { START, document, executor, rejection, thrown, virtualClock } from './helpers.mjs'

const roster = () =>
  document(
    executor('a', { roles: ['coder', 'planner'], slots: 2 }),
    executor('b', { roles: ['coder'], health: 'http://127.0.0.1:9/health' }),
  )

async function busyRoster() {
  const clock = virtualClock()
  const r = await Roster.create({ document: roster(), now: clock, probe: false })
  const held = [await r.lease('coder'), await r.lease('coder')]
  const waiting = r.lease('coder', { label: 'waiter' })
  assert.equal(r.snapshot().queue.length, 1)
  return { r, held, waiting, clock }
}

test('the raw class: every code, state unchanged', () => {
  const policy = new Policy(roster())
  policy.handle({ type: 'lease', now: START, id: 'r1', role: 'coder' })
  policy.handle({ type: 'lease', now: START, id: 'r2', role: 'coder' })
  policy.handle({ type: 'lease', now: START, id: 'r3', role: 'coder' })
  const cases = [
    ['UNKNOWN_ROLE', { type: 'lease', now: START, id: 'x1', role: 'chef' }],
    ['DUPLICATE_REQUEST', { type: 'lease', now: START, id: 'r3', role: 'coder' }],
    ['UNKNOWN_LEASE', { type: 'release', now: START, lease: 999 }],
    ['UNKNOWN_REQUEST', { type: 'cancel', now: START, id: 'nobody' }],
    ['UNKNOWN_EXECUTOR', { type: 'report', now: START, executor: 'zz', failure: { kind: 'outage' } }],
    ['UNKNOWN_EXECUTOR', { type: 'exclude', now: START, executor: 'zz' }],
    ['UNKNOWN_EXECUTOR', { type: 'resume', now: START, executor: 'zz' }],
    ['INVALID_INPUT', { type: 'lease', now: START, id: 'x2', role: 'coder', rank: 'first' }],
    ['INVALID_INPUT', { type: 'lease', now: -1, id: 'x3', role: 'coder' }],
    ['INVALID_INPUT', { type: 'warp', now: START }],
    ['INVALID_INPUT', { now: START }],
    ['INVALID_INPUT', 'tick'],
    ['INVALID_INPUT', { type: 'report', now: START, executor: 'a', failure: { kind: 'meteor' } }],
    ['INVALID_INPUT', { type: 'tick', now: 10n }],
    ['INVALID_DOCUMENT', { type: 'reload', now: START, document: { executors: [{ id: 'a' }] } }],
    ['INVALID_INPUT', { type: 'restore', now: START, state: { exclusions: [{ id: 'a', kind: 'forever' }] } }],
  ]
  for (const [code, input] of cases) {
    const before = JSON.stringify(policy.exportState())
    const snapshot = policy.snapshot()
    const error = thrown(() => policy.handle(input))
    assert.equal(error.code, code, `${JSON.stringify(input, (k, v) => (typeof v === 'bigint' ? `${v}n` : v))}: ${error.message}`)
    assert.ok(error instanceof Error && error instanceof RotaError)
    assert.ok(error.message.length > 10)
    assert.deepEqual(policy.snapshot(), snapshot, `${code}: snapshot unchanged`)
    assert.equal(JSON.stringify(policy.exportState()), before, `${code}: state unchanged`)
  }
  const queries = [
    ['UNKNOWN_ROLE', () => policy.available('chef')],
    ['UNKNOWN_ROLE', () => policy.slots('chef')],
    ['UNKNOWN_ROLE', () => policy.canEverServe('chef')],
    ['INVALID_INPUT', () => policy.available(42)],
    ['INVALID_INPUT', () => policy.canEverServe('coder', 'a')],
    ['UNKNOWN_ROLE', () => policy.explain({ role: 'chef' })],
    ['INVALID_INPUT', () => policy.explain({ avoid: [] })],
    ['INVALID_DOCUMENT', () => policy.plan({ executors: 'none' })],
  ]
  for (const [code, query] of queries) {
    const before = JSON.stringify(policy.exportState())
    const error = thrown(query)
    assert.equal(error.code, code, `${query}: ${error.message}`)
    assert.equal(JSON.stringify(policy.exportState()), before)
  }
})

test('the driver: every code, snapshot unchanged', async () => {
  const { r, held, waiting } = await busyRoster()
  const before = r.snapshot()
  const same = () => assert.deepEqual(r.snapshot(), before)

  assert.equal((await rejection(r.lease('chef'))).code, 'UNKNOWN_ROLE')
  same()
  assert.equal((await rejection(r.tryLease('chef'))).code, 'UNKNOWN_ROLE')
  same()
  assert.equal((await rejection(r.lease('coder', { rank: 'first' }))).code, 'INVALID_INPUT')
  same()
  assert.equal((await rejection(r.lease('coder', { timeoutMs: -5 }))).code, 'INVALID_INPUT')
  same()
  assert.equal((await rejection(r.lease('coder', { avoid: 7 }))).code, 'INVALID_INPUT')
  same()
  assert.equal((await rejection(r.lease('coder', null))).code, 'INVALID_INPUT')
  same()
  const queued = before.queue[0].request
  assert.equal((await rejection(r.lease('coder', { id: queued }))).code, 'DUPLICATE_REQUEST')
  same()
  assert.equal(thrown(() => r.report('zz', new Error('down'))).code, 'UNKNOWN_EXECUTOR')
  same()
  assert.equal(thrown(() => r.exclude('zz')).code, 'UNKNOWN_EXECUTOR')
  same()
  assert.equal(thrown(() => r.exclude('a', { kind: 'forever' })).code, 'INVALID_INPUT')
  same()
  assert.equal(thrown(() => r.resume('zz')).code, 'UNKNOWN_EXECUTOR')
  same()
  assert.equal(thrown(() => r.available('chef')).code, 'UNKNOWN_ROLE')
  assert.equal(thrown(() => r.slots('chef')).code, 'UNKNOWN_ROLE')
  assert.equal(thrown(() => r.canEverServe('chef')).code, 'UNKNOWN_ROLE')
  assert.equal(thrown(() => r.explain('chef')).code, 'UNKNOWN_ROLE')
  const reload = await rejection(r.reload({ executors: [{ id: 'a', roles: ['chef'], slots: -1 }] }))
  assert.equal(reload.code, 'INVALID_DOCUMENT')
  assert.ok(reload.violations.length >= 3, 'harness, role and slots at once')
  same()
  assert.equal(thrown(() => r.plan({ executors: [{ id: '' }] })).code, 'INVALID_DOCUMENT')
  same()

  for (const lease of held) lease.release()
  assert.ok((await waiting).executorId, 'the waiter got the freed slot')
  assert.ok((await r.lease('coder')).executorId, 'and the other freed slot went to the next')
  const next = r.lease('coder')
  assert.equal(r.snapshot().queue.length, 1)
  await r.close()
  assert.equal((await rejection(next)).code, 'CLOSED')
  assert.equal((await rejection(r.lease('coder'))).code, 'CLOSED')
  assert.equal(thrown(() => r.resume('a')).code, 'CLOSED')
})

test('Roster.create: a bad document rejects INVALID_DOCUMENT with every violation', async () => {
  const error = await rejection(
    Roster.create({
      document: {
        executors: [
          { id: 'a', harness: 'pi', roles: ['chef'] },
          { id: 'a', harness: 'pi', roles: ['coder'], health: 'ftp://x', priority: 'high' },
        ],
      },
    }),
  )
  assert.equal(error.code, 'INVALID_DOCUMENT')
  const paths = error.violations.map((v) => v.path)
  assert.deepEqual(paths, ['document: executors[1].id', 'executors[0].priority', 'executors[0].health'])
  assert.match(error.violations[0].message, /'a' is listed twice/)
  // An unknown id in `executors` is ignored (a warning, as the seed does); the
  // document's own violations still refuse it.
  const narrowed = await rejection(
    Roster.create({ document: { executors: [{ id: 'a', harness: 'pi', roles: ['chef'] }] }, executors: ['zz', 'a'] }),
  )
  assert.equal(narrowed.code, 'INVALID_DOCUMENT')
  assert.deepEqual(
    narrowed.violations.map((v) => v.path),
    ['executors[0].roles', 'executors[0].roles'],
    'the document violations (unknown role, no role)',
  )
  assert.equal((await rejection(Roster.create({}))).code, 'INVALID_DOCUMENT')
  const options = await rejection(Roster.create({ document: roster(), probe: true, now: 5, machines: { create: 'x' }, probeTimeoutMs: -1 }))
  assert.equal(options.code, 'INVALID_INPUT')
  assert.match(options.message, /now must be a function; probe must be a function or false; machines.create must be a function; probeTimeoutMs/)
  assert.equal((await rejection(Roster.create({ document: roster(), options: { bogus: 1 } }))).code, 'INVALID_INPUT')
})
