// `WorkerSlots`: the worker-slot scheduler of @usine/orchestrator (its `reserve`,
// `occupy`, status and reload of the `workers` declaration with preflight) as an Effect
// service and Layer over rota's one Node roster. The roster reads the orchestrator's
// `workers` list as it is (every role; the first declared free worker; a request
// nothing can serve waits); the queue is the core's lease order (rank, then event time,
// then arrival). This module adapts shapes and runs the caller's Effects; nothing here
// decides.

import * as Context from 'effect/Context'
import * as Effect from 'effect/Effect'
import * as Layer from 'effect/Layer'
import * as Schema from 'effect/Schema'
import { Roster } from 'rota'
import { closeWithScope, runtime } from './runtime.js'

/** A reload the roster refused: a worker's preflight failed (`worker`, `message`), or the core refused the declaration. */
export class WorkersReloadRefused extends Schema.TaggedError()('WorkersReloadRefused', {
  worker: Schema.optionalKey(Schema.String),
  message: Schema.String,
}) {}

/** The service: `reserve`, `occupy`, `status`, `reload` (see makeWorkerSlots). */
export class WorkerSlots extends Context.Service()('rota/effect/WorkerSlots') {}

const LEVELS = { debug: Effect.logDebug, info: Effect.logInfo, warn: Effect.logWarning }

/**
 * `{ workers, preflight?, kinds? }` → the service. `workers`: the orchestrator's
 * declaration (`[{ name, kind, maxConcurrentAttempts | max_concurrent_attempts }]`).
 * `preflight(worker)`: an Effect that fails when the worker cannot run attempts; given
 * one, every worker is preflighted before the service starts (a failure fails it), and
 * so is every worker a reload adds or grows. The roster's events go to Effect's logger.
 * Inside a Scope (a Layer's), the roster closes with it.
 */
export const makeWorkerSlots = Effect.fn('rota/effect/makeWorkerSlots')(function* (options) {
  const { runFork, runPromise, scheduler } = yield* runtime()
  const waiters = new Set()
  const onEvent = (event) => {
    runFork((LEVELS[event.level] ?? Effect.logInfo)(event.message, event.fields ?? {}))
    for (const waiter of [...waiters]) waiter(event)
  }
  const preflight =
    options.preflight === undefined
      ? undefined
      : ({ spec }) =>
          runPromise(options.preflight(spec).pipe(Effect.as(true))).catch((error) => {
            throw error?.cause?.failures?.[0] ?? error
          })
  const roster = yield* Effect.tryPromise({
    try: () =>
      Roster.create({
        document: { workers: options.workers },
        scheduler,
        probe: false,
        preflight,
        onEvent,
        ...(options.kinds === undefined ? {} : { options: { kinds: options.kinds } }),
      }),
    catch: (error) => error,
  })
  yield* closeWithScope(roster)
  const role = () => roster.snapshot().roles[0]

  const leaseOf = (lease, worker) =>
    lease === undefined ? { worker, release: Effect.void } : { worker: lease.executorId, release: Effect.sync(() => lease.release()) }

  /**
   * A slot for run `runId`: on `worker` when given (a reattached attempt's: it waits even
   * while that worker is undeclared), else the first declared free one. `position`:
   * `{ rank?, eventTime? }` (lower first; unranked after ranked; then event time, then
   * arrival). Interrupting the wait cancels it; a slot granted meanwhile is released.
   */
  const reserve = (runId, { worker, position = {} } = {}) =>
    Effect.uninterruptibleMask((restore) => {
      let granted
      const wait = Effect.callback((resume, signal) => {
        const request = { label: runId, signal }
        if (worker !== undefined) request.pin = worker
        if (position.rank !== undefined) request.rank = position.rank
        if (position.eventTime !== undefined) request.eventTime = position.eventTime
        roster.lease(role(), request).then(
          (lease) => {
            if (signal.aborted) lease.release()
            else resume(Effect.succeed((granted = lease)))
          },
          (error) => {
            if (!signal.aborted) resume(Effect.die(error))
          },
        )
      })
      return restore(wait).pipe(
        Effect.onInterrupt(() => Effect.sync(() => granted?.release())),
        Effect.map((lease) => leaseOf(lease)),
      )
    })

  /** Work already running on `worker` after a restart: a slot even beyond capacity (an undeclared worker: none). */
  const occupy = (worker, attemptId) =>
    Effect.sync(() => leaseOf(roster.occupy(worker, { role: role(), ...(attemptId === undefined ? {} : { id: attemptId }) }), worker))

  /** Slots per worker (`capacity`, `leased`), the queue (each run with how many wait ahead of it), each worker's last preflight. */
  const status = Effect.sync(() => {
    const snapshot = roster.snapshot()
    return {
      slots: snapshot.executors.map((e) => ({ worker: e.id, capacity: e.draining ? 0 : e.slots, leased: e.busy })),
      queue: snapshot.queue.map((q) => ({ runId: q.label, ahead: q.ahead, ...(q.pin === undefined ? {} : { worker: q.pin }) })),
      preflights: snapshot.executors.flatMap((e) => (e.preflight === undefined ? [] : [{ worker: e.id, ...e.preflight }])),
    }
  })

  /** Replaces the `workers` declaration live; with a preflight, workers added or grown pass it first, or nothing changes. */
  const reload = (workers) =>
    Effect.callback((resume) => {
      const waiter = (event) => {
        if (event.name === 'reloaded') done(Effect.void)
        else if (event.name === 'reloadRefused') done(Effect.fail(WorkersReloadRefused.make({ worker: event.fields.executor, message: event.message })))
        else if (event.name === 'reloadSuperseded') done(Effect.fail(WorkersReloadRefused.make({ message: event.message })))
      }
      const done = (effect) => {
        waiters.delete(waiter)
        // Not inside the roster's step that announced it: the caller's fiber goes on after.
        queueMicrotask(() => resume(effect))
      }
      waiters.add(waiter)
      roster.reload({ workers }).catch((error) => done(Effect.fail(WorkersReloadRefused.make({ message: error.message }))))
      return Effect.sync(() => waiters.delete(waiter))
    })

  return WorkerSlots.of({ reserve, occupy, status, reload, roster })
})

/** The `WorkerSlots` Layer: the roster closes with the Layer's scope. */
export const layer = (options) => Layer.effect(WorkerSlots, makeWorkerSlots(options))
