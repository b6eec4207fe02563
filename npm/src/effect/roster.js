// `makeRoster`: the roster seed's `RosterShape` (@llm4ts/flow 2.9.1, Roster.ts) over
// rota's one Node roster. Nothing here decides: the roster (and its core) does; this
// module adapts shapes and carries out effects on Effect's runtime:
// - time is Effect's `Clock` and every timer of the roster sleeps on Effect's
//   scheduler (the roster's `scheduler` seam), so `TestClock.adjust` fires exclusion
//   ends, probes and deadlines (on the live Clock, the roster's own Node timers: the
//   same clock, and no timer holds the process);
// - a lease is a scoped Effect: its release is the Scope's finalizer (idempotent); an
//   interrupted wait cancels the request; `RosterExhausted` is a tagged failure;
// - the state store, the probe and the events are the caller's Effects, run with the
//   services `makeRoster` was made with;
// - `report`, `exclude` and `resume` return once the state store holds their write.

import * as Effect from 'effect/Effect'
import { Roster } from 'rota'
import { closeWithScope, runtime } from './runtime.js'
import { Info, RosterExhausted, exclusionOf } from './schema.js'

/** The roster's events the seed published (as `Info` "roster: …" lines), by rota's name. */
const SEED_EVENTS = new Set(['granted', 'waiting', 'excluded', 'exclusionChanged', 'back', 'resumed', 'stateFileWriteFailed', 'stateFileUnreadable', 'stateFileCorrupt'])
/** Events that say a report's exclusion is (still) the one in force. */
const KEPT_EVENTS = new Set(['exclusionKept', 'exclusionQueued', 'exclusionChanged'])

const plain = (spec) => JSON.parse(JSON.stringify(spec))

function checkOptions(options) {
  const wrong = []
  if (options === null || typeof options !== 'object') throw new TypeError('makeRoster takes { executors, events, state?, probe? }')
  if (!Array.isArray(options.executors)) wrong.push('executors must be an array of ExecutorSpec')
  if (options.events === null || typeof options.events !== 'object' || typeof options.events.publish !== 'function') {
    wrong.push('events must be { publish(event) }')
  }
  const state = options.state
  if (state !== undefined && (state === null || typeof state !== 'object' || !Effect.isEffect(state.load) || typeof state.save !== 'function')) {
    wrong.push('state must be { load: Effect, save(ids, exclusions) }')
  }
  if (options.probe !== undefined && typeof options.probe !== 'function') wrong.push('probe must be (url) => Effect<boolean>')
  return wrong
}

/**
 * The roster seed's `makeRoster(options)`: `{ executors, events, state?, probe? }` →
 * `RosterShape`, failing with rota's `RotaError` (`INVALID_DOCUMENT` with every
 * violation) for a document the core refuses. Inside a Scope, the roster closes
 * with it; outside, it lives as long as the program.
 */
export const makeRoster = Effect.fn('rota/effect/makeRoster')(function* (options) {
  const wrong = checkOptions(options)
  if (wrong.length > 0) return yield* Effect.die(new TypeError(`makeRoster: ${wrong.join('; ')}`))
  const { executors, events } = options
  // Time and timers: Effect's Clock, through the Node roster's `scheduler` option (runtime.js).
  const { runFork, runPromise, scheduler } = yield* runtime(() => publish)

  // The roster's events: the seed's lines are published as `Info`, in order, by the
  // fiber whose call made them (or, for those of a timer or a callback, a fiber of their own).
  const lines = []
  /** The events of the call that changes state (report's answer reads them), only while it runs. */
  let heard
  let publishing = false
  const publish = Effect.suspend(() => {
    if (lines.length === 0) return Effect.void
    const batch = lines.splice(0)
    return Effect.forEach(batch, (message) => events.publish(Info.make({ message: `roster: ${message}` })), { discard: true })
  })
  const onEvent = (event) => {
    heard?.push(event)
    if (!SEED_EVENTS.has(event.name)) return
    lines.push(event.message)
    if (!publishing) {
      publishing = true
      runFork(Effect.yieldNow.pipe(Effect.andThen(Effect.sync(() => (publishing = false))), Effect.andThen(publish)))
    }
  }

  const state = options.state === undefined ? undefined : {
    load: async () => {
      const exclusions = await runPromise(options.state.load)
      return { version: 1, exclusions: exclusions.map(plain) }
    },
    save: (update) => runPromise(options.state.save(update.ids, update.state.exclusions.map((e) => exclusionOf(e.id, e)))),
  }
  const probe = options.probe === undefined ? false : (url, { signal }) => runPromise(options.probe(url), { signal })

  const roster = yield* Effect.tryPromise({
    try: () => Roster.create({ document: { executors: executors.map(plain) }, scheduler, onEvent, probe, state }),
    catch: (error) => error,
  })
  yield* publish
  yield* closeWithScope(roster)

  const specs = new Map(executors.map((spec) => [spec.id, spec]))
  const specOf = (id) => specs.get(id)

  /**
   * A granted Node lease as the seed's `Lease`, released by the Scope's finalizer; with
   * the upstream's `purpose` when its request gave one (@llm4ts/flow 2.7.2's FlowEvents
   * has no typed lease events: the purpose is in the granted Info line), and its
   * borrowing (a lease over the context's own coder) only when it applies.
   */
  const scoped = (lease, role) => {
    const release = Effect.sync(() => lease.release()).pipe(Effect.andThen(publish))
    const seedLease = { executor: specOf(lease.executorId), role, release }
    if (lease.purpose !== undefined) seedLease.purpose = lease.purpose
    if (lease.borrowed) seedLease.borrowed = true
    if (lease.because !== undefined) seedLease.because = lease.because
    return Effect.as(Effect.addFinalizer(() => release), seedLease)
  }

  const leaseOptions = (options = {}) => {
    const out = {}
    if (options.avoid !== undefined) out.avoid = [...options.avoid]
    if (options.prefer !== undefined) out.prefer = options.prefer
    if (options.label !== undefined) out.label = options.label
    // The upstream's LeaseOptions.purpose (a review lens), said in the granted line.
    if (options.purpose !== undefined) out.purpose = options.purpose
    if (options.borrow !== undefined) out.borrow = options.borrow
    // rota's tenant: its turn among the tenants (`fairness: "tenants"`).
    if (options.tenant !== undefined) out.tenant = options.tenant
    // rota's cache key: the executor of the key's last grant is preferred.
    if (options.affinity !== undefined) out.affinity = options.affinity
    return out
  }

  /** `ask(signal)`: the Node roster's promise of a lease (or undefined); interruption aborts it. */
  const acquire = (role, ask) =>
    Effect.uninterruptibleMask((restore) => {
      let granted
      const wait = Effect.callback((resume, signal) => {
        ask(signal).then(
          (lease) => {
            if (signal.aborted) lease?.release()
            else {
              granted = lease
              resume(Effect.succeed(lease))
            }
          },
          (error) => {
            if (error?.code === 'EXHAUSTED') resume(Effect.fail(RosterExhausted.make({ role, reasons: [...(error.reasons ?? [])] })))
            else if (!signal.aborted) resume(Effect.die(error))
          },
        )
      })
      return restore(Effect.ensuring(wait, Effect.suspend(() => publish))).pipe(
        Effect.onInterrupt(() => Effect.sync(() => granted?.release())),
        Effect.flatMap((lease) => (lease === undefined ? Effect.succeed(undefined) : scoped(lease, role))),
      )
    })

  const lease = (role, options) => acquire(role, (signal) => roster.lease(role, { ...leaseOptions(options), signal }))
  const tryLease = (role, options) => acquire(role, () => roster.tryLease(role, leaseOptions(options)))

  /** A call that changes state: run, its events published, its write in the store; an unknown id ignored (as the seed does) with a logged warning. */
  const change = (what, id, call) =>
    Effect.suspend(() => {
      heard = []
      let value
      try {
        value = call()
      } catch (error) {
        heard = undefined
        if (error?.code !== 'UNKNOWN_EXECUTOR') return Effect.die(error)
        return Effect.logWarning(`rota/effect: ${what} of '${id}' ignored: no executor '${id}' in the roster`).pipe(Effect.as(undefined))
      }
      const seen = heard
      heard = undefined
      return Effect.promise(() => roster.flush().catch(() => {})).pipe(
        Effect.andThen(publish),
        Effect.as({ value, seen }),
      )
    })

  const inForce = (id) => {
    const exclusion = roster.snapshot().executors.find((e) => e.id === id)?.exclusion
    return exclusion === undefined ? undefined : exclusionOf(id, exclusion)
  }

  const report = (id, error) =>
    change('report', id, () => roster.report(id, error)).pipe(
      Effect.map((answer) => {
        if (answer === undefined) return undefined
        // (A health exclusion's next probe time is the snapshot's.)
        if (answer.value !== undefined) return answer.value.kind === 'health' ? inForce(id) : exclusionOf(id, answer.value)
        // Earned, but a stronger or later one stays in force: the seed returned what it earned; rota's answer is the one in force.
        const kept = answer.seen.some((e) => KEPT_EVENTS.has(e.name) && e.fields?.executor === id)
        return kept ? inForce(id) : undefined
      }),
    )

  const exclude = (exclusion) =>
    change('exclude', exclusion.id, () =>
      roster.exclude({ id: exclusion.id, kind: exclusion.kind, reason: exclusion.reason, until: exclusion.until }),
    ).pipe(Effect.asVoid)

  const resume = (id) => change('resume', id, () => roster.resume(id)).pipe(Effect.asVoid)

  const canEverServe = (role, avoid = []) => Effect.sync(() => roster.canEverServe(role, [...avoid]))
  const available = (role) => Effect.sync(() => roster.available(role))
  const slots = (role) => roster.slots(role)
  // The upstream's later queries (Roster.ts 2083c508).
  const capacity = (role) => Effect.sync(() => roster.capacity(role))
  const capacityChanged = (role, from) => Effect.promise(() => roster.capacityChanged(role, from))
  const coderHeld = (role, avoid = []) => Effect.sync(() => roster.coderHeld(role, [...avoid]))
  const independenceBlocked = (role, avoid = []) => Effect.sync(() => roster.independenceBlocked(role, [...avoid]))

  const snapshot = Effect.sync(() =>
    roster.snapshot().executors.map((status) => {
      const entry = { executor: specOf(status.id), busy: status.busy, busyCoders: status.busyByRole?.coder ?? 0 }
      if (status.exclusion !== undefined) entry.exclusion = exclusionOf(status.id, status.exclusion)
      return entry
    }),
  )

  return { executors, lease, tryLease, canEverServe, available, slots, capacity, capacityChanged, coderHeld, independenceBlocked, report, exclude, resume, snapshot, roster }
})
