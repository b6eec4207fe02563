// Metrics: Prometheus text from roster.metrics(), and the same counts through an
// OpenTelemetry Meter (the real @opentelemetry/api + sdk-metrics, from the package's
// dev dependencies).

import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { test } from 'node:test'
import { Roster, memoryState } from 'rota'
import { document, executor, rejection, virtualClock } from './helpers.mjs'

const root = process.env.ROTA_PACKAGE_ROOT
const requireDev = createRequire(join(root ?? '.', 'package.json'))

/** The sample lines of a Prometheus text, as { 'name{labels}': value }. */
function samples(text) {
  const out = {}
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const at = line.lastIndexOf(' ')
    out[line.slice(0, at)] = Number(line.slice(at + 1))
  }
  return out
}

/** The sum of a metric's samples over its labels. */
const total = (samples, name) =>
  Object.entries(samples)
    .filter(([key]) => key === name || key.startsWith(`${name}{`))
    .reduce((sum, [, value]) => sum + value, 0)

async function workload(options = {}) {
  const clock = virtualClock()
  const roster = await Roster.create({
    document: document(executor('a'), executor('b', { roles: ['coder', 'judge'], health: 'http://127.0.0.1:9/h' })),
    now: clock,
    probe: async () => false,
    state: memoryState(),
    ...options,
  })
  const first = await roster.lease('coder', { prefer: 'a' })
  const second = await roster.lease('coder')
  const waiting = roster.lease('coder', { label: 'w' })
  const judge = roster.lease('judge')
  judge.catch(() => {}) // still waiting at close (b is out)
  const before = roster.metrics()
  clock.advance(2_000)
  first.release() // the waiter: granted after 2 s
  const third = await waiting
  roster.report('b', Object.assign(new Error('502: backend is unhealthy'), { status: 502 })) // an outage (the seed's signal): health exclusion, a probe
  roster.exclude('a', { reason: 'maintenance' })
  clock.advance(15_000) // the health probe's interval while a request waits
  roster.tick()
  await roster.idle()
  second.release()
  third.release()
  await roster.idle()
  return { roster, before, after: roster.metrics(), clock }
}

test('roster.metrics(): Prometheus text of grants, waits, exclusions, probes, queue, state writes', async (t) => {
  const { roster, before, after } = await workload()
  t.after(() => roster.close())
  const b = samples(before)
  assert.equal(b['rota_queue_length{role="coder"}'], 1)
  assert.equal(b['rota_queue_length{role="judge"}'], 1)
  assert.equal(b['rota_queue_length{role="planner"}'], 0, 'every role of the document, zeros too')
  const s = samples(after)
  assert.equal(total(s, 'rota_leases_granted_total'), 3)
  assert.equal(s['rota_leases_granted_total{executor="a",role="coder"}'], 2)
  assert.equal(s['rota_leases_granted_total{executor="b",role="coder"}'], 1)
  assert.equal(s['rota_leases_granted_total{executor="b",role="judge"}'], 0, 'every role of an executor, zeros too')
  assert.equal(s.rota_lease_wait_seconds_count, 3)
  assert.equal(s.rota_lease_wait_seconds_sum, 2)
  assert.equal(s['rota_lease_wait_seconds_bucket{le="0.005"}'], 2, 'two at once')
  assert.equal(s['rota_lease_wait_seconds_bucket{le="1"}'], 2)
  assert.equal(s['rota_lease_wait_seconds_bucket{le="2.5"}'], 3, 'one after 2 s')
  assert.equal(s['rota_lease_wait_seconds_bucket{le="+Inf"}'], 3)
  assert.equal(s['rota_exclusions_total{kind="health"}'], 1)
  assert.equal(s['rota_exclusions_total{kind="manual"}'], 1)
  assert.ok(s.rota_probes_total >= 1)
  assert.ok(s.rota_state_writes_total >= 1)
  assert.equal(s['rota_queue_length{role="coder"}'], 0)
  assert.equal(s['rota_queue_length{role="judge"}'], 1, 'the judge still waits (b is out)')
  assert.match(after, /^# HELP rota_leases_granted_total .+\n# TYPE rota_leases_granted_total counter\n/)
  assert.match(after, /# TYPE rota_lease_wait_seconds histogram\n/)
  assert.match(after, /# TYPE rota_queue_length gauge\n/)
  assert.ok(after.endsWith('\n'))
})

test('an OpenTelemetry Meter gets the same metrics', { skip: root === undefined && 'run through test/run.mjs' }, async (t) => {
  const { MeterProvider, MetricReader, AggregationTemporality } = requireDev('@opentelemetry/sdk-metrics')
  class Reader extends MetricReader {
    constructor() {
      super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE })
    }
    onForceFlush() {
      return Promise.resolve()
    }
    onShutdown() {
      return Promise.resolve()
    }
  }
  const reader = new Reader()
  const provider = new MeterProvider({ readers: [reader] })
  const { roster } = await workload({ meter: provider.getMeter('rota') })
  const { resourceMetrics } = await reader.collect()
  const metrics = new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]))
  const value = (name, attributes = {}) =>
    metrics
      .get(name)
      ?.dataPoints.find((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))?.value
  assert.equal(value('rota_leases_granted_total', { executor: 'a', role: 'coder' }), 2)
  assert.equal(value('rota_leases_granted_total', { executor: 'b', role: 'coder' }), 1)
  assert.equal(value('rota_failures_total', { executor: 'b', kind: 'outage' }), 1)
  assert.equal(value('rota_slots_in_use', { executor: 'a', role: 'coder' }), 0)
  assert.equal(value('rota_excluded', { executor: 'b', kind: 'health' }), 1)
  assert.equal(value('rota_excluded', { executor: 'a', kind: 'manual' }), 1)
  assert.equal(value('rota_capacity', { role: 'coder' }), 0, 'both out of the round')
  assert.equal(value('rota_lease_wait_seconds').count, 3)
  assert.equal(value('rota_lease_wait_seconds').sum, 2)
  assert.equal(value('rota_exclusions_total', { kind: 'health' }), 1)
  assert.equal(value('rota_exclusions_total', { kind: 'manual' }), 1)
  assert.ok(value('rota_probes_total') >= 1)
  assert.ok(value('rota_state_writes_total') >= 1)
  assert.equal(value('rota_queue_length', { role: 'judge' }), 1)
  assert.equal(value('rota_queue_length', { role: 'coder' }), 0)
  await roster.close()
  await provider.shutdown()
  assert.equal((await rejection(Roster.create({ document: document(executor('a')), meter: {} }))).code, 'INVALID_INPUT')
})

test('per executor and role: slots in use, capacity, exclusions by kind, grants, failures by kind, budget waits', async (t) => {
  const clock = virtualClock()
  const roster = await Roster.create({
    document: document(
      executor('a', { slots: 2 }),
      executor('b', { roles: ['coder', 'judge'], slots: 2, coderSlots: 1, health: 'http://127.0.0.1:9/h' }),
      executor('c', { roles: ['judge'] }),
    ),
    now: clock,
    probe: async () => false,
  })
  t.after(() => roster.close())
  const a1 = await roster.lease('coder', { prefer: 'a' })
  const a2 = await roster.lease('coder', { prefer: 'a' })
  const judge = await roster.lease('judge', { prefer: 'b' })
  a2.release()
  roster.report('a', Object.assign(new Error('429 Too Many Requests'), { status: 429 })) // one of three: no exclusion
  roster.report('b', { kind: 'usageLimit', message: 'usage limit reached' }) // until the usage cooldown
  roster.report('c', new Error('timed out')) // other
  const s = samples(roster.metrics())
  assert.equal(s['rota_leases_granted_total{executor="a",role="coder"}'], 2)
  assert.equal(s['rota_leases_granted_total{executor="b",role="judge"}'], 1)
  assert.equal(s['rota_leases_granted_total{executor="c",role="judge"}'], 0)
  assert.equal(s['rota_slots_in_use{executor="a",role="coder"}'], 1)
  assert.equal(s['rota_slots_in_use{executor="b",role="judge"}'], 1)
  assert.equal(s['rota_slots_in_use{executor="b",role="coder"}'], 0)
  assert.equal(s['rota_capacity{role="coder"}'], 2, "a's two slots; b is out")
  assert.equal(s['rota_capacity{role="judge"}'], 1, 'c')
  assert.equal(s['rota_excluded{executor="b",kind="until"}'], 1)
  assert.equal(s['rota_excluded{executor="b",kind="health"}'], 0)
  assert.equal(s['rota_excluded{executor="a",kind="until"}'], 0)
  assert.equal(s['rota_failures_total{executor="a",kind="rateLimit"}'], 1)
  assert.equal(s['rota_failures_total{executor="b",kind="usageLimit"}'], 1)
  assert.equal(s['rota_failures_total{executor="c",kind="other"}'], 1)
  assert.equal(s['rota_failures_total{executor="a",kind="other"}'], undefined, 'kinds only as reported')
  assert.equal(s['rota_budget_waits_total{executor="a",role="coder"}'], 0, 'no budget: no budget wait')
  const text = roster.metrics()
  for (const [name, type] of [['rota_slots_in_use', 'gauge'], ['rota_capacity', 'gauge'], ['rota_excluded', 'gauge'], ['rota_failures_total', 'counter'], ['rota_budget_waits_total', 'counter']]) {
    assert.match(text, new RegExp(`# HELP ${name} .+\n# TYPE ${name} ${type}\n`))
  }
  a1.release()
  judge.release()
})

test('a reload that removes an executor removes its series once it has left', async (t) => {
  const roster = await Roster.create({ document: document(executor('a'), executor('b')), now: virtualClock() })
  t.after(() => roster.close())
  const held = await roster.lease('coder', { prefer: 'b' })
  roster.report('b', new Error('boom'))
  let text = roster.metrics()
  assert.match(text, /executor="b"/)
  await roster.reload(document(executor('a')))
  text = roster.metrics()
  assert.match(text, /rota_slots_in_use\{executor="b",role="coder"\} 1/, 'b drains its lease')
  held.release()
  text = roster.metrics()
  assert.doesNotMatch(text, /executor="b"/)
  assert.match(text, /rota_leases_granted_total\{executor="a",role="coder"\} 0/)
  assert.match(text, /rota_excluded\{executor="a",kind="run"\} 0/)
})

test('rota_budget_waits_total counts each request that waited for an executor\'s budget, once, by executor and role', async (t) => {
  const clock = virtualClock()
  const roster = await Roster.create({
    document: document(executor('a', { slots: 3, budget: { requests: 1, per: '1 minute' } }), executor('b', { roles: ['judge'] })),
    now: clock,
  })
  t.after(() => roster.close())
  const waits = () => samples(roster.metrics())['rota_budget_waits_total{executor="a",role="coder"}']
  const first = await roster.lease('coder')
  assert.equal(waits(), 0, 'within the budget')
  const second = roster.lease('coder')
  const third = roster.lease('coder')
  await new Promise((resolve) => setImmediate(resolve))
  assert.equal(waits(), 2, 'two requests waited for its room')
  const judge = roster.lease('judge')
  assert.equal(samples(roster.metrics())['rota_budget_waits_total{executor="b",role="judge"}'], 0, 'b has no budget')
  clock.advance(60_000)
  roster.tick()
  ;(await second).release()
  assert.equal(waits(), 2, 'a grant at room is no new wait')
  first.release()
  ;(await judge).release()
  clock.advance(60_000)
  roster.tick()
  ;(await third).release()
})
