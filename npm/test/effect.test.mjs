// rota/effect (issue 44, item 2): the roster seed's surface over rota's Node roster,
// driven by Effect's TestClock (every wait here is virtual time moved by
// `TestClock.adjust`; nothing sleeps on a real timer). `effect` is an optional peer
// dependency: the test project gets the package's dev copy (or ROTA_EFFECT_MODULES',
// to test another 4.x release) linked into its node_modules.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'

const project = process.env.ROTA_TEST_PROJECT ?? process.cwd()
const modules = process.env.ROTA_EFFECT_MODULES ?? process.env.ROTA_DEV_MODULES ?? join(import.meta.dirname, '..', 'node_modules')
const link = join(project, 'node_modules', 'effect')
if (!existsSync(link)) {
  mkdirSync(dirname(link), { recursive: true })
  symlinkSync(join(modules, 'effect'), link, 'dir')
}

const Effect = await import('effect/Effect')
const Fiber = await import('effect/Fiber')
const TestClock = await import('effect/testing/TestClock')
const effectVersion = JSON.parse(readFileSync(join(link, 'package.json'), 'utf8')).version
const R = await import('rota/effect')
const { ExecutorSpec, Exclusion, RosterExhausted, makeRoster, makeRosterStateStore } = R

test(`effect ${effectVersion}`, () => {
  assert.match(effectVersion, /^4\./)
})

/** Events published, as the seed's Info lines. */
function collecting() {
  const lines = []
  return { lines, events: { publish: (event) => Effect.sync(() => lines.push(`${event._tag}: ${event.message}`)) } }
}

/** A PlainFileStoreShape in memory (the seed's `makeMemoryPlainFileStore`, reduced to what the store uses). */
function memoryFiles(initial = {}) {
  const files = { ...initial }
  return {
    files,
    read: (path) => Effect.sync(() => files[path]),
    writeAtomic: (path, contents) => Effect.sync(() => void (files[path] = contents)),
    remove: (path) => Effect.sync(() => void delete files[path]),
  }
}

const spec = (id, fields = {}) => ExecutorSpec.make({ id, harness: 'pi', roles: ['coder'], ...fields })

/** Runs `body(roster, lines)` in a Scope under a TestClock at 0. */
const run = (options, body) => {
  const { lines, events } = collecting()
  return Effect.runPromise(
    Effect.gen(function* () {
      const roster = yield* makeRoster({ events, ...options })
      return yield* body(roster, lines)
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())),
  )
}

/** One real event-loop turn: promise callbacks of the roster run (no time passes). */
const settle = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))

test('a lease is scoped: granted at once, released by its Scope, release idempotent; the seed Info lines', async () => {
  await run({ executors: [spec('a')] }, (roster, lines) =>
    Effect.gen(function* () {
      const lease = yield* Effect.scoped(
        Effect.gen(function* () {
          const lease = yield* roster.lease('coder', { label: 'story-1' })
          assert.equal(lease.executor.id, 'a')
          assert.ok(lease.executor instanceof ExecutorSpec)
          assert.equal(lease.role, 'coder')
          assert.equal(yield* roster.available('coder'), 0)
          assert.equal(yield* roster.tryLease('coder'), undefined)
          return lease
        }),
      )
      assert.equal(yield* roster.available('coder'), 1)
      // Idempotent: the scope released it; releasing again frees nothing more.
      yield* lease.release
      yield* Effect.scoped(
        Effect.gen(function* () {
          const one = yield* roster.lease('coder')
          yield* lease.release
          assert.equal(yield* roster.available('coder'), 0)
          yield* one.release
          yield* one.release
          assert.equal(yield* roster.available('coder'), 1)
        }),
      )
      assert.deepEqual(lines.slice(0, 2), ['Info: roster: a takes coder for story-1', 'Info: roster: a takes coder'])
    }),
  )
})

test('a waiter is served when the exclusion ends: TestClock.adjust fires it, not a moment before', async () => {
  await run({ executors: [spec('a')] }, (roster, lines) =>
    Effect.gen(function* () {
      const exclusion = yield* roster.report('a', { _tag: 'UsageLimitError', message: 'limit' })
      assert.deepEqual({ ...exclusion }, { id: 'a', kind: 'until', until: 30 * 60_000, reason: 'usage limit (limit)' })
      assert.ok(exclusion instanceof Exclusion)
      let granted
      const waiter = yield* Effect.forkChild(
        Effect.scoped(Effect.map(roster.lease('coder', { label: 'story-2' }), (lease) => (granted = lease.executor.id))),
      )
      yield* settle
      yield* TestClock.adjust('29 minutes')
      yield* settle
      assert.equal(granted, undefined)
      yield* TestClock.adjust('1 minute')
      yield* Fiber.join(waiter)
      assert.equal(granted, 'a')
      assert.deepEqual(lines, [
        'Info: roster: a out of the round until 1970-01-01T00:30:00.000Z: usage limit (limit)',
        'Info: roster: waiting for an executor to take coder for story-2: a until 1970-01-01T00:30:00.000Z: usage limit (limit)',
        'Info: roster: a back in the round',
        'Info: roster: a takes coder for story-2',
      ])
    }),
  )
})

test('an interrupted wait cancels its request; a freed slot goes to the next waiter', async () => {
  await run({ executors: [spec('a')] }, (roster) =>
    Effect.gen(function* () {
      const held = yield* Effect.scoped(
        Effect.gen(function* () {
          const lease = yield* roster.lease('coder')
          const waiter = yield* Effect.forkChild(Effect.scoped(roster.lease('coder')))
          yield* settle
          assert.equal(roster.roster.waiting, 1)
          yield* Fiber.interrupt(waiter)
          assert.equal(roster.roster.waiting, 0)
          return lease
        }),
      )
      assert.equal(held.executor.id, 'a')
      // Nothing leaked: the slot is free again and the interrupted request holds none.
      assert.equal(yield* roster.available('coder'), 1)
      assert.equal(roster.roster.leased, 0)
    }),
  )
})

test("an ExecutorSpec keeps rota's recovery and exclusion: probation after a cooldown, one slot", async () => {
  const probation = spec('a', { slots: 2, recovery: { mode: 'probation', maxBackoff: 4 }, exclusion: { consecutiveFailures: 3 } })
  assert.deepEqual(probation.recovery, { mode: 'probation', maxBackoff: 4 })
  assert.deepEqual(probation.exclusion, { consecutiveFailures: 3 })
  await run({ executors: [probation] }, (roster) =>
    Effect.gen(function* () {
      yield* roster.report('a', { kind: 'usageLimit', message: 'usage limit' })
      yield* TestClock.adjust('30 minutes')
      yield* settle
      // Back on probation: one of its two slots.
      assert.equal(yield* roster.available('coder'), 1)
    }),
  )
})

test('RosterExhausted is a tagged failure (catchTag) with the role and a reason per executor', async () => {
  await run({ executors: [spec('a'), spec('b')] }, (roster) =>
    Effect.gen(function* () {
      yield* roster.report('a', { _tag: 'AuthenticationError', message: 'OAuth token has expired.' })
      const error = yield* Effect.scoped(roster.lease('coder', { avoid: ['b'] })).pipe(Effect.flip)
      assert.ok(error instanceof RosterExhausted)
      assert.equal(error._tag, 'RosterExhausted')
      assert.equal(error.role, 'coder')
      assert.deepEqual(error.reasons, ['a for this run: not signed in (OAuth token has expired.)'])
      const caught = yield* Effect.scoped(roster.lease('coder', { avoid: ['b'] })).pipe(
        Effect.as('leased'),
        Effect.catchTag('RosterExhausted', (e) => Effect.succeed(`exhausted ${e.role}`)),
      )
      assert.equal(caught, 'exhausted coder')
      assert.equal(yield* roster.canEverServe('coder', ['b']), false)
      assert.equal(yield* roster.canEverServe('coder'), true)
    }),
  )
})

test('report returns the exclusion in force, also when a second report leaves it unchanged; snapshot in the seed shape', async () => {
  await run({ executors: [spec('a', { slots: 2 }), spec('b')] }, (roster) =>
    Effect.gen(function* () {
      const usage = yield* roster.report('a', { _tag: 'UsageLimitError', message: 'limit' })
      yield* TestClock.adjust('1 minute')
      // A later end wins …
      const later = yield* roster.report('a', { _tag: 'UsageLimitError', message: 'limit again' })
      assert.equal(later.until, usage.until + 60_000)
      // … and a weaker one leaves the one in force, which report returns.
      const first = yield* roster.report('a', { _tag: 'AuthenticationError', message: 'expired' })
      assert.equal(first.kind, 'run')
      const again = yield* roster.report('a', { _tag: 'UsageLimitError', message: 'limit, a third time' })
      assert.deepEqual({ ...again }, { ...first })
      assert.equal(yield* roster.report('a', { _tag: 'ProviderError', message: 'bad request' }), undefined)
      const lease = yield* Effect.scoped(roster.lease('coder'))
      assert.equal(lease.executor.id, 'b')
      const snapshot = yield* roster.snapshot
      assert.deepEqual(
        snapshot.map((s) => ({ id: s.executor.id, busy: s.busy, busyCoders: s.busyCoders, exclusion: s.exclusion && { ...s.exclusion } })),
        [
          { id: 'a', busy: 0, busyCoders: 0, exclusion: { ...first } },
          { id: 'b', busy: 0, busyCoders: 0, exclusion: undefined },
        ],
      )
      assert.equal(roster.slots('coder'), 3)
    }),
  )
})

test('report, exclude and resume of an unknown id are ignored (as the seed does), with a logged warning', async () => {
  await run({ executors: [spec('a')] }, (roster, lines) =>
    Effect.gen(function* () {
      assert.equal(yield* roster.report('zz', { _tag: 'AuthenticationError', message: 'no' }), undefined)
      yield* roster.exclude(Exclusion.make({ id: 'zz', kind: 'manual', reason: 'ops' }))
      yield* roster.resume('zz')
      assert.equal(yield* roster.available('coder'), 1)
      assert.deepEqual(lines, [])
    }),
  )
})

test('a health exclusion is probed on Effect time with the given probe; up brings it back', async () => {
  const probed = []
  let up = false
  const probe = (url) => Effect.sync(() => (probed.push(url), up))
  await run({ executors: [spec('a', { health: 'http://engine/health' })], probe }, (roster, lines) =>
    Effect.gen(function* () {
      const exclusion = yield* roster.report('a', { _tag: 'ProviderError', message: 'the engine is recovering' })
      assert.equal(exclusion.kind, 'health')
      const waiter = yield* Effect.forkChild(Effect.scoped(roster.lease('coder')))
      yield* settle
      const first = probed.length
      assert.ok(first >= 1)
      yield* TestClock.adjust('15 seconds')
      yield* settle
      assert.equal(probed.length, first + 1)
      up = true
      yield* TestClock.adjust('15 seconds')
      const lease = yield* Fiber.join(waiter)
      assert.equal(lease.executor.id, 'a')
      assert.ok(lines.includes('Info: roster: a answers its health check again; back in the round'))
    }),
  )
})

test("without a probe, a health URL's outage waits out the outage cooldown (the seed's rule)", async () => {
  await run({ executors: [spec('a', { health: 'http://engine/health', cooldown: { outage: '2 minutes' } })] }, (roster) =>
    Effect.gen(function* () {
      yield* roster.report('a', { _tag: 'ProviderError', message: 'the engine is recovering' })
      assert.equal(yield* roster.available('coder'), 0)
      yield* TestClock.adjust('2 minutes')
      assert.equal(yield* roster.available('coder'), 1)
    }),
  )
})

test("the state store writes the seed's envelope before exclude/report/resume return; a restart reads it", async () => {
  const files = memoryFiles()
  const path = '.llm4ts/roster-state.json'
  const state = makeRosterStateStore(files, path)
  await run({ executors: [spec('a'), spec('b')], state }, (roster) =>
    Effect.gen(function* () {
      yield* roster.exclude(Exclusion.make({ id: 'a', kind: 'manual', reason: 'ops' }))
      assert.equal(
        files.files[path],
        `${JSON.stringify({ schemaVersion: 1, value: { exclusions: [{ id: 'a', reason: 'ops', kind: 'manual' }] } }, undefined, 2)}\n`,
      )
      yield* roster.report('b', { _tag: 'UsageLimitError', message: 'limit' })
      assert.deepEqual(JSON.parse(files.files[path]).value.exclusions.map((e) => e.id), ['a', 'b'])
      yield* roster.resume('a')
      assert.deepEqual(JSON.parse(files.files[path]).value.exclusions.map((e) => e.id), ['b'])
    }),
  )
  // Another entry of another roster is kept; a restart restores this roster's.
  files.files[path] = files.files[path].replace('"exclusions": [', '"exclusions": [\n      { "id": "other", "reason": "x", "kind": "manual" },')
  await run({ executors: [spec('a'), spec('b')], state }, (roster) =>
    Effect.gen(function* () {
      const snapshot = yield* roster.snapshot
      assert.equal(snapshot.find((s) => s.executor.id === 'b').exclusion.reason, 'usage limit (limit)')
      yield* roster.exclude(Exclusion.make({ id: 'a', kind: 'manual', reason: 'again' }))
      assert.deepEqual(JSON.parse(files.files[path]).value.exclusions.map((e) => e.id).sort(), ['a', 'b', 'other'])
    }),
  )
  // A file that is not a roster state is set aside, never written over.
  const broken = memoryFiles({ [path]: 'not json' })
  await run({ executors: [spec('a')], state: makeRosterStateStore(broken, path) }, (roster) =>
    Effect.gen(function* () {
      yield* roster.exclude(Exclusion.make({ id: 'a', kind: 'manual', reason: 'ops' }))
      const aside = Object.keys(broken.files).find((name) => name.startsWith(`${path}.corrupt-`))
      assert.equal(broken.files[aside], 'not json')
    }),
  )
})

test('makeRoster works outside a Scope (the roster lives on; its Node roster can be closed)', async () => {
  const { events } = collecting()
  const roster = await Effect.runPromise(makeRoster({ executors: [spec('a')], events }))
  const id = await Effect.runPromise(Effect.scoped(Effect.map(roster.lease('coder'), (lease) => lease.executor.id)))
  assert.equal(id, 'a')
  await roster.roster.close()
})

test("on Effect's live Clock, a roster no Scope closes does not keep the process alive", () => {
  const script = join(project, 'test', 'effect-live-exit.mjs')
  writeFileSync(
    script,
    `import * as Effect from 'effect/Effect'
import { ExecutorSpec, makeRoster } from 'rota/effect'
const roster = await Effect.runPromise(makeRoster({ executors: [ExecutorSpec.make({ id: 'a', harness: 'pi', roles: ['coder'] })], events: { publish: () => Effect.void } }))
const exclusion = await Effect.runPromise(roster.report('a', { _tag: 'UsageLimitError', message: 'limit' }))
console.log(exclusion.until - Date.now() > 29 * 60_000 ? 'excluded' : 'wrong')
`,
  )
  // (A wake-up is armed for the exclusion's end, 30 minutes on: it must not hold the process.)
  const child = spawnSync(process.execPath, [script], { cwd: project, encoding: 'utf8', timeout: 20_000 })
  assert.equal(child.signal, null, 'the process was still running after 20 s')
  assert.equal(child.status, 0, child.stderr)
  assert.equal(child.stdout.trim(), 'excluded')
})

test('the seed helpers answer from the core', () => {
  const a = spec('a', { roles: ['coder', 'planner'], slots: 3, priority: { coder: 2, default: 5 } })
  assert.equal(R.slotsOf(a), 3)
  assert.equal(R.coderSlotsOf(a), 2)
  assert.equal(R.priorityOf(a, 'coder'), 2)
  assert.equal(R.priorityOf(a, 'judge'), 5)
  assert.equal(R.parseDuration('90s').toString(), R.parseDuration('1.5 minutes').toString())
  assert.equal(R.parseDuration('soon'), undefined)
  assert.equal(R.usageLimitCooldown(a).toString(), R.parseDuration('30 minutes').toString())
  assert.equal(R.rateLimitCooldown(a).toString(), R.parseDuration('10 minutes').toString())
  assert.equal(R.outageCooldown(spec('b', { cooldown: { outage: '2m' } })).toString(), R.parseDuration('2 minutes').toString())
  assert.equal(R.rateLimitsToExclude, 3)
  assert.equal(R.isModelUnavailableMessage("There's an issue with the selected model"), true)
  assert.equal(R.isModelUnavailableMessage('rate limited'), false)
  assert.deepEqual(R.rosterViolations(R.RosterDocument.make({ executors: [spec('a'), spec('a')] })), ["executor 'a' is listed twice"])
  const user = R.RosterDocument.make({ executors: [spec('a'), spec('b')] })
  const repo = R.RosterDocument.make({ executors: [spec('b', { disabled: true }), spec('c')] })
  assert.deepEqual(R.mergeRosterDocuments(user, repo).executors.map((s) => s.id), ['a', 'c'])
  assert.deepEqual(R.narrowRoster(user, ['b']).executors.map((s) => s.id), ['b'])
  assert.equal(
    R.describeExclusion(Exclusion.make({ id: 'a', kind: 'until', until: Date.UTC(2026, 0, 1), reason: 'usage limit (x)' })),
    'until 2026-01-01T00:00:00.000Z: usage limit (x)',
  )
  const rate = { _tag: 'RateLimitError', message: 'rate limited' }
  assert.equal(R.exclusionFor(rate, a, 0, 2), undefined)
  assert.deepEqual({ ...R.exclusionFor(rate, a, 0, 3) }, { id: 'a', kind: 'until', until: 10 * 60_000, reason: '3 rate limits within 10m' })
})

test("a lease's purpose (the upstream's LeaseOptions.purpose) is on the lease and in the seed's granted Info line", async () => {
  await run({ executors: [spec('a', { roles: ['reviewer'] })] }, (roster, lines) =>
    Effect.scoped(
      Effect.gen(function* () {
        const lease = yield* roster.lease('reviewer', { label: 'story a', purpose: 'adversarial lens' })
        assert.equal(lease.purpose, 'adversarial lens')
        const plain = yield* Effect.scoped(roster.tryLease('reviewer'))
        assert.equal(plain, undefined)
        assert.deepEqual(lines.slice(0, 1), ['Info: roster: a takes reviewer for story a · adversarial lens'])
      }),
    ),
  )
})

test("rota's tenant in LeaseOptions reaches the core: the granted line names it", async () => {
  await run({ fairness: 'tenants', executors: [spec('a', { roles: ['reviewer'] })] }, (roster, lines) =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* roster.lease('reviewer', { tenant: 'acme' })
        assert.deepEqual(lines.slice(0, 1), ['Info: roster: a takes reviewer (tenant acme)'])
      }),
    ),
  )
})

test("the upstream's borrow and capacity: a saturated roster borrows the context's coder; capacityChanged wakes at a cooldown's end on TestClock", async () => {
  const both = (id) => spec(id, { roles: ['coder', 'reviewer'] })
  await run({ executors: [both('a'), both('b')] }, (roster, lines) =>
    Effect.gen(function* () {
      const coder = yield* roster.lease('coder', { label: 'a' })
      yield* roster.lease('coder', { label: 'b' })
      assert.equal(yield* roster.coderHeld('reviewer', ['a']), true)
      assert.equal(yield* roster.independenceBlocked('reviewer', ['a']), 'held')
      const review = yield* roster.lease('reviewer', { avoid: ['a'], borrow: coder.executor, label: 'a' })
      assert.deepEqual([review.executor.id, review.borrowed, review.because], ['a', true, 'held'])
      assert.equal('borrowed' in coder, false)
      assert.ok(
        lines.includes("Info: roster: a takes reviewer for a on its own coder's slot — not independent (every other executor that takes reviewer is held by a coder)"),
        lines.join('\n'),
      )
      assert.equal(yield* roster.capacity('reviewer'), 2)
      yield* roster.report('b', { _tag: 'UsageLimitError', message: 'limit' })
      assert.equal(yield* roster.capacity('reviewer'), 1)
      let back
      const waiter = yield* Effect.forkChild(Effect.map(roster.capacityChanged('reviewer', 1), (n) => (back = n)))
      yield* settle
      yield* TestClock.adjust('29 minutes')
      yield* settle
      assert.equal(back, undefined)
      yield* TestClock.adjust('1 minute')
      yield* Fiber.join(waiter)
      assert.equal(back, 2)
    }).pipe(Effect.scoped),
  )
})

test("a lease's affinity key passes through: the key's executor is taken again where round-robin would go elsewhere", async () => {
  await run({ executors: [spec('a'), spec('b')] }, (roster) =>
    Effect.gen(function* () {
      const first = yield* Effect.scoped(Effect.map(roster.lease('coder', { affinity: 'session-1' }), (lease) => lease.executor.id))
      assert.equal(first, 'a')
      // b was never leased: round-robin alone gives b; the key keeps a.
      const again = yield* Effect.scoped(Effect.map(roster.lease('coder', { affinity: 'session-1' }), (lease) => lease.executor.id))
      assert.equal(again, 'a')
      const other = yield* Effect.scoped(Effect.map(roster.lease('coder'), (lease) => lease.executor.id))
      assert.equal(other, 'b')
    }),
  )
})
