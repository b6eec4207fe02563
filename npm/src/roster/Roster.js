// The roster: the fold of one ordered input log by the core (DESIGN.md, "One roster per
// language"). Its log lives in memory (memory-log.js: the default; appending folds at
// once, so calls that change state answer synchronously) or in PostgreSQL (pg-log.js:
// a replica of a log shared by several processes; calls that change state append and
// settle when their entry is folded, so they return Promises). Either way every output
// goes through one dispatcher (dispatch.js), which acts on it when this instance is
// the one the protocol names (sql/PROTOCOL.md, "Who acts on an output"): with a log in
// memory it is every owner and the leader.

import { RotaError, closed } from '../errors.js'
import { emitterOverTarget } from '../events.js'
import { PendingRequest } from '../pending.js'
import { Announcer } from './announcer.js'
import { defineCalls } from './calls.js'
import { Dispatcher } from './dispatch.js'
import { checkOptions, documents, watchFiles } from './document.js'
import { Ledger } from './ledger.js'
import { Machines } from './machines.js'
import { MemoryLog } from './memory-log.js'
import { Preflights } from './preflight.js'
import { defineQueries } from './queries.js'
import { DEFAULT_PROBE_TIMEOUT_MS, Probes, defaultProbe } from './probes.js'
import {
  Lease,
  abortError,
  asyncDisposeSymbol,
  checkRequest,
  duplicate,
  omitUndefined,
  requestFields,
} from './requests.js'
import { StateWriter } from './state.js'
import { platformScheduler, schedulerOf } from './scheduler.js'

/**
 * `policy[HANDLE_AT_LEVEL](input, minLevel)`: `handle`, but the answer leaves out the
 * events below `minLevel` (0 debug, 1 info, 2 warn; api.js defines it: the core still
 * decides and emits them, only nobody reads them). The roster steps this way while
 * nobody listens for events or outputs: it needs only the warn events itself
 * (`excluded`, for report() and the metrics). `minLevel | NO_PERSIST` leaves out the
 * `persist` outputs too: a roster with no state file has nothing to do with them.
 */
export const HANDLE_AT_LEVEL = Symbol.for('rota.handleAtLevel')
/**
 * `policy[DRIVER_STEP](input, minLevel)`: `HANDLE_AT_LEVEL` (0: `handle`) of an input
 * the roster built itself, whose shape it knows (binary.js `encodeTrusted`). The same
 * answers and errors.
 */
export const DRIVER_STEP = Symbol.for('rota.driverStep')
export const NO_PERSIST = 4
/** Test-only: `roster[CRASH]()` stops a shared instance as a crash would (no cancel, no step-down, no expiry). */
export const CRASH = Symbol.for('rota.crash')
const LEVEL_WARN = 2
/** A lease's options when none are given (read only, so one serves every call). */
const NO_OPTIONS = Object.freeze({})

/** Builds the Roster class over a wasm API ({ Policy, merge, narrow, validate, ... }) and a platform. */
export function defineRoster(api, platform) {
  const { resolveDocument, buildPolicy } = documents(api, platform)
  const probeByFetch = defaultProbe(api)
  const constructing = Symbol('constructing')

  class Roster {
    static {
      defineQueries(this, (roster) => roster.#side)
      defineCalls(this, (roster) => roster.#side)
      // `on('event', fn)`: every decision's event and the driver's own; `on('output', fn)`:
      // every raw output; `off`, `once` alike. Each returns the roster.
      for (const method of ['on', 'off', 'once']) {
        const value = {
          [method](name, listener) {
            this.#announce.listen(method, name, listener)
            return this
          },
        }[method]
        Object.defineProperty(this.prototype, method, { value, writable: true, configurable: true })
      }
    }

    #policy = null
    #driverStep
    #options
    #announce
    #metrics
    /** The log: a MemoryLog, or a shared roster's PgLog. */
    #log
    #remote
    #ledger = new Ledger()
    #pending = this.#ledger.pending
    #requestSeq = 0
    #closing = false
    #closed = false
    #closePromise
    #closeController = new AbortController()
    #inflight = new Set()
    #specs
    #unwatch
    #probes
    #machines
    #preflights
    #state
    /** The clock and timers (scheduler.js): the option's, or the platform's; a shared roster's are the platform's. */
    #scheduler
    /** Who acts on each output (its `me`, and the time of the entry folded last: `now`). */
    #dispatcher
    /** The core's latest wake-up. */
    #wakeAt = null
    /** Called after every entry folded (capacityChanged's checks, queries.js). */
    #watchers = new Set()
    /**
     * The roster's side, for the modules around it: its log (pg-log.js folds into it and
     * settles its requests), calls.js, and the effects (probes, machines, preflights,
     * the state file) that feed their results back.
     */
    #side = {
      policy: () => this.#policy,
      wakeAt: () => this.#wakeAt,
      watchers: this.#watchers,
      adopt: (policy) => this.#adopt(policy),
      fold: (answer, now, at, type) => this.#folded(answer, now, at, type),
      /** A new incarnation on a shared log: its id, its request numbers from 1. */
      instance: (id) => {
        this.#dispatcher.me = id
        this.#requestSeq = 0
      },
      requests: this.#pending,
      ledger: this.#ledger,
      metrics: () => this.#metrics,
      request: (id) => this.#pending.get(id),
      settle: (id) => this.#ledger.settle(id),
      granted: (output, now) => this.#granted(output, now),
      log: () => this.#log,
      rejectAll: (error) => this.#ledger.rejectAll(error),
      probe: (executor, url, answer) => this.#probes.run(executor, url, answer),
      preflights: () => this.#preflights,
      restore: () => this.#state?.restore((input) => this.#step(input)),
      warnings: (resolved, document) => this.#warnings(resolved, document),
      tick: () => this.#timerTick(),
      close: () => this.close(),
      probed: () => this.#metrics.probed(),
      budgetWaited: (executor, role) => this.#metrics.budgetWaited(executor, role),
      written: () => this.#metrics.stateWritten(),
      event: (level, name, message, fields) => this.#announce.emit(level, name, message, fields),
      listening: () => this.#announce.heard('event'),
      signal: this.#closeController.signal,
      track: (promise) => this.#track(promise),
      closing: () => this.#closing,
      closed: () => (this.#remote ? this.#log.dead : this.#closed),
      checkClosing: () => {
        if (this.#closing) throw closed()
      },
      spec: (id) => this.#spec(id),
      entries: () => this.#entries(),
      entriesOf: (document) => api.executorEntries(document),
      feed: (input) => this.#feed(input),
      call: (build, answer) => this.#call(build, answer),
      now: () => this.#log.now(),
      scheduler: () => this.#scheduler,
      remote: () => this.#remote,
      /** A reload's document, resolved as at create; its warnings said. */
      resolve: async (document) => {
        this.#checkOpen()
        const base = this.#options
        const resolved = await resolveDocument(
          document === undefined ? base : { ...base, document, repoDocument: undefined, rosterPath: undefined, repoRosterPath: undefined },
        )
        this.#checkOpen()
        this.#warnings(resolved, resolved.document)
        this.#preflights.pendingDocument = resolved.document
        return resolved.document
      },
    }

    /** Use `Roster.create`. */
    constructor(token, options, store) {
      if (token !== constructing) throw new TypeError('use Roster.create(options)')
      this.#options = options
      this.#scheduler = options.shared === undefined ? schedulerOf(options) : platformScheduler()
      this.#announce = new Announcer(platform.emitter?.() ?? emitterOverTarget(), {
        meter: options.meter,
        onEvent: options.onEvent,
        queueByRole: () => this.#queueByRole(),
        state: () => this.#metricsState(),
        time: () => {
          try {
            return this.#log.now()
          } catch {
            return this.#dispatcher.now
          }
        },
        instance: () => this.#dispatcher.me,
      })
      this.#metrics = this.#announce.metrics
      const probe = options.probe === false ? undefined : (options.probe ?? probeByFetch)
      const side = this.#side
      this.#probes = new Probes(probe, options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS, side)
      this.#machines = new Machines(options.machines, side)
      this.#preflights = new Preflights(options.preflight, side)
      if (store !== undefined) this.#state = new StateWriter(store, options.stateRetry, side)
      this.#dispatcher = new Dispatcher({
        roster: side,
        ledger: this.#ledger,
        announce: this.#announce,
        machines: this.#machines,
        preflights: this.#preflights,
        state: this.#state,
      })
    }

    /**
     * Reads and merges the roster (the user's, then the repository's over it), narrows
     * it to `executors`, validates it (every violation at once), restores the state
     * file, and starts. With `shared`, joins the log on PostgreSQL instead.
     */
    static async create(options = {}) {
      if (options === null || typeof options !== 'object') {
        throw new RotaError('INVALID_INPUT', 'Roster.create takes an options object')
      }
      checkOptions(options)
      const coreOptions = { ...options.options }
      if (coreOptions.canProbe === undefined) coreOptions.canProbe = options.probe !== false
      if (options.shared !== undefined) return Roster.#createShared(options, coreOptions)
      const resolved = await resolveDocument(options, true)
      // The seed preflights whenever it can: at start, and (the core's default) on reloads.
      if (coreOptions.preflight === undefined) coreOptions.preflight = typeof options.preflight === 'function'
      const policy = buildPolicy(resolved, coreOptions, options.options?.kinds)
      let store = options.state
      if (store === undefined && options.statePath !== undefined) {
        if (platform.fileStore === undefined) {
          throw new RotaError('INVALID_INPUT', 'statePath needs a file system: give `state: { load, save }`')
        }
        store = platform.fileStore(options.statePath)
      }
      const roster = new Roster(constructing, options, store)
      roster.#remote = false
      roster.#log = new MemoryLog(roster.#scheduler, roster.#side)
      await roster.#log.open(policy, resolved, coreOptions.preflight === true)
      if (options.watch === true) {
        roster.#unwatch = watchFiles(platform, options, roster.#side, () => roster.reload())
      }
      return roster
    }

    /** `shared`: a replica of a log on PostgreSQL (pg-log.js, loaded only here: the browser never loads `pg`). */
    static async #createShared(options, coreOptions) {
      if (platform.sharedRoster === undefined) {
        throw new RotaError('INVALID_INPUT', `Roster.create: a shared roster needs Node (PostgreSQL through the 'pg' package); this is the ${platform.name} build`)
      }
      const { PgLog } = await platform.sharedRoster()
      const hasDocument = ['document', 'repoDocument', 'rosterPath', 'repoRosterPath'].some((k) => options[k] !== undefined)
      const resolved = hasDocument ? await resolveDocument(options) : undefined
      const roster = new Roster(constructing, options)
      roster.#remote = true
      roster.#announce.listened = true
      await PgLog.open(options.shared, resolved, coreOptions, api, (log) => {
        roster.#log = log
        roster.#dispatcher.me = log.instance
        return roster.#side
      })
      roster.#warnings({}, () => roster.#policy.document())
      return roster
    }

    #adopt(policy) {
      this.#policy?.free?.()
      this.#policy = policy
      // (A module another buildApi wrapped first has only HANDLE_AT_LEVEL: the same answers.)
      this.#driverStep = policy[DRIVER_STEP] ?? policy[HANDLE_AT_LEVEL]
      this.#specs = undefined
      if (this.#remote) {
        this.#wakeAt = policy.wakeAt ?? null
        this.#dispatcher.now = policy.now ?? 0
      }
    }

    // ---- the fold ---------------------------------------------------------------------

    /** The log in memory: feeds one input, handles every output, re-arms the timer. Throws a rejected input. */
    #step(input) {
      const announce = this.#announce
      const outputsHeard = announce.listened && announce.heard('output')
      const eventsHeard = outputsHeard || (announce.listened && announce.heard('event'))
      // Without a state file, the persist outputs concern only a listener of raw outputs.
      const minLevel = (eventsHeard ? 0 : LEVEL_WARN) | (this.#state === undefined && !outputsHeard ? NO_PERSIST : 0)
      const answer = this.#driverStep.call(this.#policy, input, minLevel)
      this.#folded(answer, input.now, undefined, input.type)
      this.#log.wake(this.#wakeAt)
      return answer.outputs
    }

    /** An entry folded (a shared log's, at `at`; in memory: here): dispatches every output. */
    #folded({ outputs, wakeAt }, now, at, type) {
      // Kept before dispatching: a listener may feed another input, whose answer is later.
      this.#wakeAt = wakeAt ?? null
      if (type === 'reload' || type === 'preflightResult') this.#specs = undefined
      this.#dispatcher.fold(outputs, now, at)
      if (this.#watchers.size > 0) for (const watch of [...this.#watchers]) watch()
    }

    /** A step whose failure is reported as an event (results that come back late). */
    #stepQuietly(input) {
      if (this.#closed) return undefined
      try {
        return this.#step(input)
      } catch (error) {
        this.#announce.emit('warn', 'inputRejected', `the core rejected a ${input.type}: ${error.message}`, { input: input.type, code: error.code })
        return undefined
      }
    }

    /** An effect's result (a probe's, a machine's, a preflight's): appended to the log. */
    #feed(input) {
      if (this.#remote) return this.#log.append(input)
      input.now = this.#log.now()
      return this.#stepQuietly(input)
    }

    #timerTick() {
      try {
        this.tick()
      } catch (error) {
        // Only the clock can throw here (tick's input is never rejected).
        this.#announce.emit('warn', 'clockFailed', error.message, { code: error.code })
      }
    }

    /** Feeds a `tick` at `now()` (a log in memory: the timer does this; tests on virtual time call it). */
    tick() {
      if (this.#closed || this.#remote) return
      this.#stepQuietly({ type: 'tick', now: this.#log.ticking() })
    }

    /** A resolved document's warnings (document(): the document, when someone listens). */
    #warnings(resolved, document) {
      this.#announce.warnings(resolved, () => api.check(typeof document === 'function' ? document() : document, this.#options.options?.kinds).warnings)
    }

    /** The running document's entries by id: an executor's as written, a worker's declaration (the core's `executorEntries`). */
    #entries() {
      this.#specs ??= new Map(api.executorEntries(this.#policy.document() ?? {}))
      return this.#specs
    }

    #spec(id) {
      return this.#entries().get(id) ?? { id }
    }

    #granted(output, now) {
      // Shared: fenced now if the heartbeat lapsed (its callers rejected), so the lease goes back.
      if (this.#remote) this.#log.lapsed()
      const pending = this.#ledger.settle(output.request)
      const spec = this.#spec(output.executor)
      // The core resolves an executor's effort for the role; asked only of one that sets it.
      const effort = spec.effort === undefined ? undefined : this.#policy.effortOf(output.executor, output.role)
      const lease = new Lease(output, spec, this.#releaseLease, now, pending?.input?.purpose, effort)
      this.#ledger.hold(lease.role, 1)
      if (pending === undefined || pending.abortReason !== undefined) {
        // Nobody waits for it (given up, fenced, an earlier life of this instance): back at once.
        lease.release()
        pending?.reject(pending.abortReason)
        return
      }
      if (output.occupied === true) this.#metrics.leaseOccupied(output.executor, output.role)
      else this.#metrics.leaseGranted(now - (pending.sentAt ?? now), output.executor, output.role)
      pending.resolve(lease)
    }

    #releaseLease = (lease, role) => {
      this.#ledger.hold(role, -1)
      if (this.#remote) {
        if (!this.#log.dead) this.#log.append(`{"type":"release","lease":${lease}}`)
      } else if (!this.#closed) {
        this.#stepQuietly({ type: 'release', now: this.#log.now(), lease })
      }
    }

    #track(promise) {
      this.#inflight.add(promise)
      const done = () => this.#inflight.delete(promise)
      // (then with both handlers: a rejection here must not become an unhandled one)
      promise.then(done, done)
      return promise
    }

    #checkOpen() {
      if (this.#closing) throw closed()
      this.#log.checkOpen()
    }

    /**
     * Waits for a slot. Rejects `EXHAUSTED` when no executor outside `avoid` can ever
     * take the role, `TIMEOUT` after `timeoutMs`, `ABORT_ERR` when `signal` aborts
     * (and, shared, FENCED).
     */
    lease(role, options = NO_OPTIONS) {
      return this.#request('lease', role, options)
    }

    /** A slot now, or `undefined`. (Async because a provisioned executor first makes a machine.) */
    tryLease(role, options = NO_OPTIONS) {
      return this.#request('tryLease', role, options)
    }

    /**
     * A request id of the roster's own, never one in use: `r<n>` in memory,
     * `<instance>/<n>` on a shared log. In memory one the core still knows (a live
     * lease's) is skipped when the core answers DUPLICATE_REQUEST (#submit).
     */
    #nextId() {
      const prefix = this.#remote ? `${this.#dispatcher.me}/` : 'r'
      let id
      do id = `${prefix}${++this.#requestSeq}`
      while (this.#pending.has(id))
      return id
    }

    /**
     * A lease or tryLease: in memory with a `deadline` (the hot path: mostly settled by
     * the step in this call); on a shared log with its owner and `timeoutMs` (the log's
     * time is the only clock).
     */
    #request(type, role, options) {
      let pending
      try {
        this.#checkOpen()
        const signal = checkRequest(type, options)
        if (signal?.aborted) return Promise.reject(abortError(this.#policy, signal, { role, label: options.label }))
        const remote = this.#remote
        const now = this.#log.now()
        const id = options.id ?? this.#nextId()
        const input = remote ? { type, id, role } : { type, now, id, role }
        const timeoutMs = requestFields(input, options)
        if (remote) {
          if (timeoutMs !== undefined) input.timeoutMs = timeoutMs
          input.owner = this.#dispatcher.me
        } else if (timeoutMs !== undefined) {
          input.deadline = now + timeoutMs
        }
        pending = this.#pend(id, new PendingRequest(type, role, options.label, options.timeoutMs, input), signal)
        pending.sentAt = now
      } catch (error) {
        return Promise.reject(error)
      }
      this.#submit(pending.input, options.id === undefined, pending)
      return pending.promise()
    }

    /** Registers a live request under `id` (refused while another lives), with its abort and keep-alive. */
    #pend(id, pending, signal) {
      if (this.#pending.has(id)) throw duplicate(id)
      if (signal !== undefined) this.#onAbort(signal, pending)
      this.#pending.set(id, pending)
      if (pending.timeoutMs !== undefined || signal !== undefined) this.#ledger.keepAlive(pending)
      return pending
    }

    /**
     * A request's input to the log: on a shared log appended (settled when its entry is
     * folded); in memory fed at once, a refusal rejecting `pending`, and a `generated`
     * id the core already knows replaced, its pending entry moved, and fed again.
     */
    #submit(input, generated, pending) {
      if (this.#remote) return this.#log.append(JSON.stringify(input), { request: input.id })
      for (;;) {
        try {
          return this.#step(input)
        } catch (error) {
          if (!generated || error?.code !== 'DUPLICATE_REQUEST') {
            this.#ledger.settle(input.id)
            return pending.reject(error)
          }
          if (this.#pending.get(input.id) === pending) this.#pending.delete(input.id)
          input.id = this.#nextId()
          this.#pending.set(input.id, pending)
        }
      }
    }

    /** A waiting request's `signal`: its abort cancels the request, which then rejects with the signal's reason. */
    #onAbort(signal, pending) {
      const input = pending.input
      const onAbort = () => {
        if (this.#pending.get(input.id) !== pending) return
        pending.abortReason = abortError(this.#policy, signal, pending, input.id)
        if (this.#remote) this.#log.append({ type: 'cancel', id: input.id })
        else if (!this.#stepQuietly({ type: 'cancel', now: this.#log.now(), id: input.id })) {
          // The core no longer knows it: settle here so nobody hangs.
          this.#ledger.settle(input.id)?.reject(pending.abortReason)
        }
      }
      signal.addEventListener('abort', onAbort, { once: true })
      pending.cleanup = () => signal.removeEventListener('abort', onAbort)
    }

    /**
     * Records work already running on an executor after a restart: it takes a slot
     * even beyond capacity. Returns its lease (shared: a Promise of it).
     */
    occupy(executor, options = {}) {
      const remote = this.#remote
      let input
      let pending
      try {
        this.#checkOpen()
        if (options === null || typeof options !== 'object') throw new RotaError('INVALID_INPUT', 'occupy options must be an object')
        const now = remote ? undefined : this.#log.now()
        input = omitUndefined({ type: 'occupy', now, id: options.id ?? this.#nextId(), executor, role: options.role, hold: options.hold, owner: this.#dispatcher.me })
        // A waiting request's id is refused before anything changes.
        pending = this.#pend(input.id, new PendingRequest('occupy', options.role, undefined, undefined, undefined))
      } catch (error) {
        if (remote) return Promise.reject(error)
        throw error
      }
      this.#submit(input, options.id === undefined, pending)
      if (remote) return pending.promise()
      if (this.#pending.get(input.id) === pending) this.#ledger.settle(input.id)
      // Its lease, granted by that step, or the core's refusal.
      if (pending.settled === 2) throw pending.value
      return pending.settled === 1 ? pending.value : undefined
    }

    /**
     * A call that changes state: `build()` gives its input (without `now`), `answer(outputs)`
     * its value. In memory it is folded at once (a refusal throws); on a shared log it
     * is appended and a Promise settles when it is folded.
     */
    #call(build, answer = () => undefined) {
      if (!this.#remote) {
        this.#checkOpen()
        return answer(this.#step(build(this.#log.now())))
      }
      try {
        this.#checkOpen()
        const entry = JSON.stringify(build())
        return new Promise((resolve, reject) => this.#log.append(entry, { resolve: (outputs) => resolve(answer(outputs)), reject }))
      } catch (error) {
        return Promise.reject(error)
      }
    }

    // ---- queries (they change nothing): queries.js adds the rest -----------------------

    get closed() {
      return this.#closing
    }

    /** Waiting requests of every role of the running document (for the queue-length gauge). */
    #queueByRole() {
      const queued = this.#ledger.queued
      const roles = this.#closed || this.#log.dead ? [...queued.keys()] : this.#policy.snapshot().roles
      return new Map(roles.map((role) => [role, queued.get(role) ?? 0]))
    }

    /** The roster as folded, for the per-executor gauges (metrics.js); undefined once closed. */
    #metricsState() {
      if (this.#closed || this.#log.dead) return undefined
      const policy = this.#policy
      return { snapshot: policy.snapshot(), capacity: (role) => policy.capacity(role) }
    }

    // ---- lifecycle -------------------------------------------------------------------------

    /** Resolves when no probe, machine callback or state write is in flight. */
    async idle() {
      while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight])
    }

    /**
     * Resolves once every state write decided so far is in the store (a write in
     * flight, and at once what a failed write left). Rejects with the store's error
     * when that write fails; the roster keeps retrying it (stateRetry).
     */
    async flush() {
      await this.#state?.settled()
    }

    /**
     * Stops: waiting requests reject CLOSED, probes abort, the timer stops, pending state
     * writes finish. Leases still held may be released; they change nothing any more.
     * A shared instance leaves the log: steps down, appends its own expiry (its leases
     * are released for the others) and forgets its heartbeat.
     */
    close() {
      if (this.#closePromise !== undefined) return this.#closePromise
      this.#closing = true
      const leaving = this.#log.leave()
      // (A shared instance's callbacks run on until it has left the log.)
      if (!this.#remote) this.#closeController.abort(closed())
      this.#unwatch?.()
      this.#metrics.close()
      this.#state?.stopRetry()
      this.#closePromise = (async () => {
        await leaving
        this.#ledger.rejectAll(() => closed('the roster closed before a lease was granted'))
        this.#closeController.abort(closed())
        this.#ledger.stop()
        await this.idle()
        await this.#state?.flush()
        this.#closed = true
        this.#log.closed = true
        this.#log.stop()
        await this.#log.end?.()
      })()
      return this.#closePromise
    }

    async [asyncDisposeSymbol]() {
      await this.close()
    }

    /** Test-only (shared): stops as a crash would; its waiting calls reject CLOSED. */
    [CRASH]() {
      if (!this.#remote || this.#log.dead) return
      this.#closing = true
      this.#ledger.stop()
      this.#closeController.abort(closed('crashed'))
      this.#closePromise = this.#log.crash(() => this.#ledger.rejectAll(() => closed('the roster crashed (test hook)')))
    }
  }

  return Roster
}
