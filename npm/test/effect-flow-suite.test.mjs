// The roster tests of the seed's era, as @llm4ts/flow's own suite wrote them
// (`packages/flow/test/Roster.test.ts` at 1e3558af: its "Roster documents",
// "exclusionFor" and "Roster leasing" cases), ported to node:test with rota/effect as
// the roster: the same executors, inputs and expectations, with @llm4ts/core@2.7.2's
// real error classes, @llm4ts/flow@2.7.2's collecting events and memory file store, and
// Effect's TestClock (as `it.effect` gives). Its "Roster seats" cases test
// `RosterSeats.ts` (the runner's seats), which rota does not provide: not ported.

import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'

const project = process.env.ROTA_TEST_PROJECT ?? process.cwd()
const devModules = process.env.ROTA_DEV_MODULES ?? join(import.meta.dirname, '..', 'node_modules')
const link = join(project, 'node_modules', 'effect')
if (!existsSync(link)) {
  mkdirSync(dirname(link), { recursive: true })
  symlinkSync(join(process.env.ROTA_EFFECT_MODULES ?? devModules, 'effect'), link, 'dir')
}
const effectVersion = JSON.parse(readFileSync(join(link, 'package.json'), 'utf8')).version
const flowPeer = JSON.parse(readFileSync(join(devModules, '@llm4ts', 'flow', 'package.json'), 'utf8')).peerDependencies.effect
// @llm4ts/flow@2.7.2's modules are Effects of its peer effect: the same copy as rota/effect's.
const skip = effectVersion === flowPeer ? false : `@llm4ts/flow@2.7.2 runs on effect ${flowPeer}, not ${effectVersion}`

const Effect = await import('effect/Effect')
const Fiber = await import('effect/Fiber')
const Ref = await import('effect/Ref')
const DateTime = await import('effect/DateTime')
const TestClock = await import('effect/testing/TestClock')
const dev = (path) => import(pathToFileURL(join(devModules, path)).href)
const Errors = skip ? {} : await dev('@llm4ts/core/dist/Errors.js')
const FlowEvents = skip ? {} : await dev('@llm4ts/flow/dist/FlowEvents.js')
const Persistence = skip ? {} : await dev('@llm4ts/flow/dist/Persistence.js')
const {
  Exclusion,
  ExecutorSpec,
  RosterDocument,
  coderSlotsOf,
  effortOf,
  exclusionFor,
  makeRoster,
  makeRosterStateStore,
  mergeRosterDocuments,
  narrowRoster,
  parseDuration,
  priorityOf,
  rosterViolations,
} = await import('rota/effect')

const executor = (id, fields = {}) => ExecutorSpec.make({ id, harness: 'pi', roles: ['coder'], ...fields })
const local = executor('pi-local', { priority: 1, health: 'http://local/v1/models' })
const onPrem = executor('lemonade', { harness: 'opencode', priority: 1 })
const codex = executor('codex', { harness: 'codex', roles: ['coder', 'reviewer', 'judge'], slots: 2, priority: { coder: 2, default: 2 } })
const claude = executor('claude', {
  harness: 'claude',
  roles: ['coder', 'reviewer', 'judge', 'verifier', 'planner'],
  slots: 3,
  priority: { coder: 3, default: 1 },
})
const at = (iso) => DateTime.makeUnsafe(iso).epochMilliseconds

/** `it.effect`: a Scope and a TestClock at 0. */
const effect = (body) => () => Effect.runPromise(Effect.scoped(Effect.gen(body)).pipe(Effect.provide(TestClock.layer())))

test('documents: the repository roster merges over the user\'s by id; --executors narrows', { skip }, () => {
  const user = RosterDocument.make({ executors: [local, codex, claude] })
  const repo = RosterDocument.make({
    executors: [executor('codex', { harness: 'codex', disabled: true }), executor('pi-local', { slots: 1, priority: 5 }), onPrem],
  })
  const merged = mergeRosterDocuments(user, repo)
  assert.deepEqual(merged.executors.map((spec) => spec.id), ['pi-local', 'claude', 'lemonade'])
  assert.equal(merged.executors[0]?.priority, 5)
  assert.deepEqual(narrowRoster(merged, ['claude']).executors.map((spec) => spec.id), ['claude'])
})

test('documents: every violation in one pass', { skip }, () => {
  const all = rosterViolations(
    RosterDocument.make({
      executors: [
        executor('a', { roles: ['coder', 'boss'] }),
        executor('a', { slots: 0 }),
        executor('b', { roles: [], coderSlots: 3 }),
        executor('c', { cooldown: { usageLimit: 'soon' } }),
      ],
    }),
  ).join('\n')
  for (const expected of ['unknown role(s) boss', "executor 'a' is listed twice", 'whole number of slots', "executor 'b' takes no role", 'coderSlots outside 0..slots', "unreadable usageLimit cooldown 'soon'"]) {
    assert.ok(all.includes(expected), `${expected} in:\n${all}`)
  }
})

test('documents: a reasoning slot stays free on an executor that also codes; priorities per role; durations', { skip }, () => {
  assert.equal(coderSlotsOf(claude), 2)
  assert.equal(coderSlotsOf(codex), 1)
  assert.equal(coderSlotsOf(local), 1)
  assert.equal(coderSlotsOf(executor('x', { slots: 3 })), 3)
  assert.equal(coderSlotsOf(executor('y', { roles: ['coder', 'judge'], slots: 3, coderSlots: 3 })), 3)
  assert.equal(priorityOf(claude, 'coder'), 3)
  assert.equal(priorityOf(claude, 'judge'), 1)
  assert.equal(priorityOf(local, 'coder'), 1)
  assert.equal(priorityOf(executor('z'), 'coder'), 1)
  // The upstream's effort (ADR 0029), resolved by the core.
  const deep = executor('deep', { roles: ['coder', 'judge'], effort: { judge: 'max', default: 'low' } })
  assert.equal(effortOf(deep, 'judge'), 'max')
  assert.equal(effortOf(deep, 'coder'), 'low')
  assert.equal(effortOf(executor('one', { effort: 'high' }), 'coder'), 'high')
  assert.equal(effortOf(executor('none'), 'coder'), undefined)
  assert.equal(parseDuration('30 minutes')?.toString(), parseDuration('30m')?.toString())
  assert.equal(parseDuration('soon'), undefined)
})

test('exclusionFor: only infrastructure failures exclude', { skip }, () => {
  const now = at('2026-09-24T10:00:00Z')
  const reset = DateTime.makeUnsafe('2026-09-24T12:30:00Z')
  const limited = exclusionFor(new Errors.UsageLimitError({ provider: 'codex', message: 'try again at 2:30 PM', resetAt: reset }), codex, now, 0)
  assert.equal(limited?.kind, 'until')
  assert.equal(limited?.until, reset.epochMilliseconds)
  assert.equal(exclusionFor(new Errors.UsageLimitError({ provider: 'pi', message: 'usage limit' }), local, now, 0)?.until, now + 30 * 60_000)
  assert.equal(exclusionFor(new Errors.RateLimitError({}), codex, now, 2), undefined)
  assert.equal(exclusionFor(new Errors.RateLimitError({}), codex, now, 3)?.until, now + 10 * 60_000)
  const down = new Errors.ProviderError({ message: '503: engine is recovering; retry shortly' })
  assert.equal(exclusionFor(down, local, now, 0)?.kind, 'health')
  assert.equal(exclusionFor(down, onPrem, now, 0)?.until, now + 5 * 60_000)
  assert.equal(exclusionFor(new Errors.AuthenticationError({ message: 'not logged in' }), claude, now, 0)?.kind, 'run')
  // What the work is worth never excludes the executor.
  assert.equal(exclusionFor(new Errors.ProviderError({ message: 'tests failed' }), local, now, 0), undefined)
  assert.equal(exclusionFor(new Errors.InvalidRequestError({ message: 'bad' }), local, now, 0), undefined)
})

test(
  'leasing: by priority, in turns within one, coder slots kept apart',
  { skip },
  effect(function* () {
    const events = yield* FlowEvents.makeCollectingFlowEvents
    const roster = yield* makeRoster({ executors: [local, onPrem, codex, claude], events })
    assert.equal(roster.slots('coder'), 1 + 1 + 1 + 2)
    assert.equal(yield* roster.available('coder'), 5)
    const order = []
    for (let i = 0; i < 5; i += 1) order.push((yield* roster.lease('coder')).executor.id)
    assert.deepEqual(order, ['pi-local', 'lemonade', 'codex', 'claude', 'claude'])
    assert.equal(yield* roster.available('coder'), 0)
    assert.equal(yield* roster.tryLease('coder'), undefined)
    assert.equal((yield* roster.lease('judge')).executor.id, 'claude')
    assert.equal((yield* roster.lease('judge')).executor.id, 'codex')
    const recorded = yield* events.recorded
    assert.ok(recorded.some((event) => event._tag === 'Info' && event.message === 'roster: pi-local takes coder'))
  }),
)

test(
  'leasing: a preferred executor wins while free; a released slot is leased again',
  { skip },
  effect(function* () {
    const events = yield* FlowEvents.makeCollectingFlowEvents
    const roster = yield* makeRoster({ executors: [local, codex], events })
    const first = yield* roster.lease('coder', { prefer: 'codex' })
    assert.equal(first.executor.id, 'codex')
    yield* first.release
    yield* first.release
    assert.equal((yield* roster.lease('coder', { prefer: 'codex' })).executor.id, 'codex')
  }),
)

test(
  "leasing: waits out an exclusion's time; fails when none can ever serve",
  { skip },
  effect(function* () {
    const events = yield* FlowEvents.makeCollectingFlowEvents
    const roster = yield* makeRoster({ executors: [codex], events })
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    yield* roster.exclude(Exclusion.make({ id: 'codex', kind: 'until', until: now + 60_000, reason: 'usage limit' }))
    const waiting = yield* Effect.forkScoped(roster.lease('coder'))
    yield* TestClock.adjust('30 seconds')
    assert.equal(waiting.pollUnsafe(), undefined)
    yield* TestClock.adjust('31 seconds')
    assert.equal((yield* Fiber.join(waiting)).executor.id, 'codex')
    const said = (yield* events.recorded).flatMap((event) => (event._tag === 'Info' ? [event.message] : []))
    assert.ok(said.some((message) => message.startsWith('roster: waiting for an executor to take coder')))
    assert.ok(said.includes('roster: codex back in the round'))
    yield* roster.exclude(Exclusion.make({ id: 'codex', kind: 'run', reason: 'not logged in' }))
    const exhausted = yield* Effect.flip(roster.lease('judge'))
    assert.equal(exhausted._tag, 'RosterExhausted')
    assert.ok(exhausted.message.includes('codex for this run: not logged in'), exhausted.message)
    const nobody = yield* Effect.flip(roster.lease('planner'))
    assert.ok(nobody.message.includes('no executor in the roster takes this role'), nobody.message)
  }),
)

test(
  'leasing: a health exclusion is probed while someone waits; a manual pause holds until resumed',
  { skip },
  effect(function* () {
    const events = yield* FlowEvents.makeCollectingFlowEvents
    const up = yield* Ref.make(false)
    const roster = yield* makeRoster({ executors: [local], events, probe: () => Ref.get(up) })
    const excluded = yield* roster.report('pi-local', new Errors.ProviderError({ message: 'Metal backend is unhealthy' }))
    assert.equal(excluded?.kind, 'health')
    const waiting = yield* Effect.forkScoped(roster.lease('coder'))
    yield* TestClock.adjust('15 seconds')
    assert.equal(waiting.pollUnsafe(), undefined)
    yield* Ref.set(up, true)
    yield* TestClock.adjust('15 seconds')
    assert.equal((yield* Fiber.join(waiting)).executor.id, 'pi-local')
    yield* roster.exclude(Exclusion.make({ id: 'pi-local', kind: 'manual', reason: 'operator' }))
    assert.equal(yield* roster.available('coder'), 0)
    yield* roster.resume('pi-local')
    assert.ok((yield* roster.snapshot).every((status) => status.exclusion === undefined))
  }),
)

test(
  'leasing: three rate limits in the window exclude; exclusions with an end persist across runs',
  { skip },
  effect(function* () {
    const events = yield* FlowEvents.makeCollectingFlowEvents
    const memory = yield* Persistence.makeMemoryPlainFileStore()
    const state = makeRosterStateStore(memory.store, '/state/roster-state.json')
    const roster = yield* makeRoster({ executors: [codex, claude], events, state })
    assert.equal(yield* roster.report('codex', new Errors.RateLimitError({})), undefined)
    assert.equal(yield* roster.report('codex', new Errors.RateLimitError({})), undefined)
    assert.equal((yield* roster.report('codex', new Errors.RateLimitError({})))?.kind, 'until')
    yield* roster.report('claude', new Errors.AuthenticationError({ message: 'logged out' }))
    assert.deepEqual((yield* state.load).map((exclusion) => [exclusion.id, exclusion.kind]), [['codex', 'until']])
    // The next run starts with what this one learned.
    const next = yield* makeRoster({ executors: [codex, claude], events, state })
    assert.equal((yield* next.snapshot).find((status) => status.executor.id === 'codex')?.exclusion?.kind, 'until')
    yield* TestClock.adjust('11 minutes')
    assert.equal((yield* state.load).length, 0)
  }),
)
