// rota/effect's WorkerSlots (issue 44, item 3): the orchestrator's worker-slot scheduler
// as an Effect service and Layer over rota's roster, under a TestClock: reserve in lease
// order, pinned reattachments, occupy beyond capacity, status, interruption, and a reload
// of the `workers` declaration behind preflight.

import assert from 'node:assert/strict'
import { existsSync, mkdirSync, symlinkSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'

const project = process.env.ROTA_TEST_PROJECT ?? process.cwd()
const link = join(project, 'node_modules', 'effect')
if (!existsSync(link)) {
  mkdirSync(dirname(link), { recursive: true })
  symlinkSync(join(process.env.ROTA_EFFECT_MODULES ?? process.env.ROTA_DEV_MODULES ?? join(import.meta.dirname, '..', 'node_modules'), 'effect'), link, 'dir')
}
const Effect = await import('effect/Effect')
const Fiber = await import('effect/Fiber')
const TestClock = await import('effect/testing/TestClock')
const { WorkerSlots, WorkersReloadRefused, workerSlotsLayer } = await import('rota/effect')

const workers = [
  { name: 'w1', kind: 'docker', max_concurrent_attempts: 1 },
  { name: 'w2', kind: 'docker', maxConcurrentAttempts: 1 },
]
const settle = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
const run = (options, body) =>
  Effect.runPromise(
    Effect.gen(function* () {
      return yield* body(yield* WorkerSlots)
    }).pipe(Effect.provide(workerSlotsLayer(options)), Effect.provide(TestClock.layer())),
  )

test('reserve: the first declared free worker; waiters in lease order (rank, event time, arrival); release frees', async () => {
  await run({ workers }, (slots) =>
    Effect.gen(function* () {
      const a = yield* slots.reserve('run-1', { position: {} })
      const b = yield* slots.reserve('run-2')
      assert.deepEqual([a.worker, b.worker], ['w1', 'w2'])
      const order = []
      const wait = (runId, position) => Effect.forkChild(Effect.tap(slots.reserve(runId, { position }), (lease) => Effect.sync(() => order.push([runId, lease.worker]))))
      const late = yield* wait('run-late', { eventTime: 2_000 })
      const early = yield* wait('run-early', { eventTime: 1_000 })
      const ranked = yield* wait('run-ranked', { rank: 0, eventTime: 3_000 })
      yield* settle
      const status = yield* slots.status
      assert.deepEqual(status.queue.map((q) => q.runId), ['run-ranked', 'run-early', 'run-late'])
      assert.deepEqual(status.slots, [{ worker: 'w1', capacity: 1, leased: 1 }, { worker: 'w2', capacity: 1, leased: 1 }])
      yield* a.release
      yield* a.release
      yield* Fiber.join(ranked)
      yield* b.release
      yield* Fiber.join(early)
      assert.deepEqual(order, [['run-ranked', 'w1'], ['run-early', 'w2']])
      yield* Fiber.interrupt(late)
      assert.deepEqual((yield* slots.status).queue, [])
    }),
  )
})

test('a pinned run waits for its worker; occupy takes a slot beyond capacity; an undeclared worker takes none', async () => {
  await run({ workers }, (slots) =>
    Effect.gen(function* () {
      const held = yield* slots.occupy('w1', 'attempt-1')
      const over = yield* slots.occupy('w1', 'attempt-2')
      assert.equal(over.worker, 'w1')
      assert.deepEqual((yield* slots.status).slots[0], { worker: 'w1', capacity: 1, leased: 2 })
      const ghost = yield* slots.occupy('w9', 'attempt-3')
      assert.equal(ghost.worker, 'w9')
      const pinned = yield* Effect.forkChild(slots.reserve('run-3', { worker: 'w1' }))
      yield* settle
      // w2 is free, but the run waits for w1, which is still over capacity after one release.
      yield* held.release
      yield* settle
      assert.equal(pinned.pollUnsafe(), undefined)
      yield* over.release
      assert.equal((yield* Fiber.join(pinned)).worker, 'w1')
    }),
  )
})

test('reload: added workers take runs at once; with a preflight, a failing worker leaves the roster as it was', async () => {
  const failing = new Set()
  const preflight = (worker) => (failing.has(worker.id) ? Effect.fail(new Error(`${worker.id}: no docker daemon`)) : Effect.void)
  await run({ workers, preflight }, (slots) =>
    Effect.gen(function* () {
      assert.deepEqual((yield* slots.status).preflights.map((p) => [p.worker, p.ok]), [['w1', true], ['w2', true]])
      failing.add('w3')
      const refused = yield* Effect.flip(slots.reload([...workers, { name: 'w3', kind: 'docker', max_concurrent_attempts: 2 }]))
      assert.ok(refused instanceof WorkersReloadRefused)
      assert.equal(refused.worker, 'w3')
      assert.match(refused.message, /no docker daemon/)
      assert.equal((yield* slots.status).slots.length, 2)
      failing.clear()
      yield* slots.reload([...workers, { name: 'w3', kind: 'docker', max_concurrent_attempts: 2 }])
      assert.deepEqual((yield* slots.status).slots.map((s) => [s.worker, s.capacity]), [['w1', 1], ['w2', 1], ['w3', 2]])
      const taken = []
      for (let i = 0; i < 4; i += 1) taken.push((yield* slots.reserve(`run-${i}`)).worker)
      assert.deepEqual(taken, ['w1', 'w2', 'w3', 'w3'])
    }),
  )
})

test('a preflight that fails at start fails the Layer', async () => {
  const exit = await Effect.runPromiseExit(
    Effect.gen(function* () {
      yield* WorkerSlots
    }).pipe(Effect.provide(workerSlotsLayer({ workers, preflight: (w) => (w.id === 'w2' ? Effect.fail(new Error('image missing')) : Effect.void) }))),
  )
  assert.equal(exit._tag, 'Failure')
  assert.match(String(exit.cause), /PREFLIGHT_FAILED|image missing/)
})
