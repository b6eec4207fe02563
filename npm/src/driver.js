// The driver: turns the core's decisions into Promises, one timer, health probes,
// machine callbacks and state writes. Shared by the Node and the browser entries; the
// platform (file system or not) comes in through `platform`.
//
// The run loop is the core's contract: feed one input (with `now`), handle every
// output it returned, then arm one timer for the next wake-up. Everything the core
// asks for that takes time (a probe, a machine, a state write) runs asynchronously
// and its result comes back as another input.

import { FAILURE_KINDS, failureFacts } from './classify.js'
import {
  RotaError,
  aborted,
  closed,
  exhausted,
  invalidDocument,
  timedOut,
} from './errors.js'
import { emitterOverTarget } from './events.js'
import { Metrics } from './metrics.js'
import { PendingRequest, PendingRequests } from './pending.js'

// Node 20 ships Symbol.dispose/asyncDispose (as Symbol.for('nodejs.dispose') ...);
// elsewhere fall back to the registered symbols Babel and TypeScript helpers use.
export const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose')
export const asyncDisposeSymbol = Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')

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
const LEVEL_WARN = 2

const MAX_TIMER_MS = 2 ** 31 - 1
/** A lease's options when none are given (read only, so one serves every call). */
const NO_OPTIONS = Object.freeze({})
const DEFAULT_PROBE_TIMEOUT_MS = 5_000

/** A granted lease. `release()` is idempotent; `using` releases it on scope exit. */
export class Lease {
  #release
  #released = false

  constructor(output, spec, release, grantedAt) {
    /** The lease id (the core's). */
    this.id = output.lease
    /** The request id the driver gave the request. */
    this.request = output.request
    /** The executor's entry in the running roster document (the seed's `executor`). */
    this.executor = spec
    this.executorId = output.executor
    this.role = output.role
    if (output.hold !== undefined) this.hold = output.hold
    /** Earlier waiting requests for the role that this one passed. */
    this.passed = output.passed
    this.occupied = output.occupied === true
    this.grantedAt = grantedAt
    this.#release = release
  }

  get released() {
    return this.#released
  }

  release() {
    if (this.#released) return
    this.#released = true
    this.#release(this.id, this.role)
  }

  [disposeSymbol]() {
    this.release()
  }

  async [asyncDisposeSymbol]() {
    this.release()
  }
}

const omitUndefined = (object) => {
  const out = {}
  for (const key in object) {
    const value = object[key]
    if (value !== undefined) out[key] = value
  }
  return out
}

export const list = (value, what) => {
  if (value === undefined || value === null) return undefined
  if (typeof value === 'string') return [value]
  if (Array.isArray(value)) return value
  throw new RotaError('INVALID_INPUT', `${what} must be a list of executor ids`)
}

/**
 * The queries a roster answers from its policy (they change nothing) and its event
 * subscriptions, defined once on both rosters' prototypes: the embedded one's here
 * and the shared one's (shared/roster.js), each giving access to its private policy
 * and emitter. Non-enumerable, as class methods are.
 */
export function defineQueries(Class, policyOf, emitterOf, listening = () => {}) {
  const methods = {
    snapshot() {
      return policyOf(this).snapshot()
    },
    available(role) {
      return policyOf(this).available(role)
    },
    slots(role) {
      return policyOf(this).slots(role)
    },
    canEverServe(role, avoid = []) {
      return policyOf(this).canEverServe(role, list(avoid, 'avoid') ?? [])
    },
    explain(request) {
      return policyOf(this).explain(typeof request === 'string' ? { role: request } : request)
    },
    plan(document) {
      return policyOf(this).plan(document)
    },
    /** `on('event', fn)`: every decision's event and the driver's own; `on('output', fn)`: every raw output. */
    on(name, listener) {
      listening(this)
      emitterOf(this).on(name, listener)
      return this
    },
    off(name, listener) {
      emitterOf(this).off(name, listener)
      return this
    },
    once(name, listener) {
      listening(this)
      emitterOf(this).once(name, listener)
      return this
    },
  }
  const getters = {
    /** The running roster document. */
    document() {
      return policyOf(this).document()
    },
    /** The executors of the running roster document (the seed's `executors`). */
    executors() {
      return policyOf(this).document()?.executors ?? []
    },
  }
  for (const [name, value] of Object.entries(methods)) {
    Object.defineProperty(Class.prototype, name, { value, writable: true, configurable: true, enumerable: false })
  }
  for (const [name, get] of Object.entries(getters)) {
    Object.defineProperty(Class.prototype, name, { get, configurable: true, enumerable: false })
  }
}

/** The driver's own options, checked up front (the core checks `options.options`). */
function checkOptions(options) {
  const wrong = []
  const fn = (name, value) => value === undefined || typeof value === 'function' || wrong.push(`${name} must be a function`)
  fn('now', options.now)
  fn('onEvent', options.onEvent)
  fn('preflight', options.preflight)
  if (!(options.probe === undefined || options.probe === false || typeof options.probe === 'function')) {
    wrong.push('probe must be a function or false')
  }
  if (options.machines !== undefined) {
    if (options.machines === null || typeof options.machines !== 'object') wrong.push('machines must be { create, delete }')
    else {
      fn('machines.create', options.machines.create)
      fn('machines.delete', options.machines.delete)
    }
  }
  const retry = options.stateRetry
  if (retry !== undefined) {
    const positive = (v) => v === undefined || (Number.isFinite(v) && v > 0)
    if (retry === null || typeof retry !== 'object' || !positive(retry.firstMs) || !positive(retry.maxMs)) {
      wrong.push('stateRetry must be { firstMs?, maxMs? } in positive milliseconds')
    }
  }
  if (options.probeTimeoutMs !== undefined && !(Number.isFinite(options.probeTimeoutMs) && options.probeTimeoutMs > 0)) {
    wrong.push('probeTimeoutMs must be a positive number of milliseconds')
  }
  if (options.watch !== undefined && typeof options.watch !== 'boolean') wrong.push('watch must be true or false')
  if (options.watch === true && options.rosterPath === undefined && options.repoRosterPath === undefined) {
    wrong.push('watch needs rosterPath or repoRosterPath')
  }
  const meter = options.meter
  if (meter !== undefined && (meter === null || typeof meter.createCounter !== 'function')) {
    wrong.push('meter must be an OpenTelemetry Meter (metrics.getMeter(name) of @opentelemetry/api)')
  }
  for (const key of ['rosterPath', 'repoRosterPath', 'statePath']) {
    if (options[key] !== undefined && typeof options[key] !== 'string') wrong.push(`${key} must be a path`)
  }
  const state = options.state
  if (state !== undefined && (state === null || typeof state.load !== 'function' || typeof state.save !== 'function')) {
    wrong.push('state must be { load, save }')
  }
  if (wrong.length > 0) throw new RotaError('INVALID_INPUT', `Roster.create: ${wrong.join('; ')}`)
}

/** Ids listed twice in one roster (`side` names it in the violation's path). */
function duplicates(document, side) {
  const seen = new Set()
  const found = []
  const executors = Array.isArray(document?.executors) ? document.executors : []
  executors.forEach((entry, index) => {
    const id = entry?.id
    if (typeof id !== 'string') return
    if (seen.has(id)) {
      found.push({ path: `${side}: executors[${index}].id`, message: `executor '${id}' is listed twice` })
    }
    seen.add(id)
  })
  return found
}

/** An AbortSignal, or one like it (a polyfill's): `aborted` and `addEventListener`. */
export const isAbortSignal = (value) =>
  value !== null &&
  typeof value === 'object' &&
  typeof value.aborted === 'boolean' &&
  typeof value.addEventListener === 'function' &&
  typeof value.removeEventListener === 'function'

/** A promise that rejects with the reason of the first of `signals` to abort; `cancel()` detaches it. */
function untilAborted(signals) {
  let cancel = () => {}
  const promise = new Promise((_resolve, reject) => {
    const onAbort = (event) => {
      cancel()
      const reason = event.target.reason
      reject(reason?.name === 'TimeoutError' ? new Error('timed out', { cause: reason }) : reason)
    }
    for (const signal of signals) signal.addEventListener('abort', onAbort)
    cancel = () => {
      for (const signal of signals) signal.removeEventListener('abort', onAbort)
    }
    for (const signal of signals) if (signal.aborted) onAbort({ target: signal })
  })
  // A race that the probe won leaves this one unobserved: never an unhandled rejection.
  promise.catch(() => {})
  return { promise, cancel }
}

/** Coalesces persist updates: applying the result equals applying each in turn. */
export function combineUpdates(updates) {
  let ids = []
  let exclusions = []
  for (const update of updates) {
    const replaced = new Set(update.ids)
    exclusions = exclusions.filter((e) => !replaced.has(e.id)).concat(update.state.exclusions)
    ids = [...new Set([...ids, ...update.ids])]
  }
  return { ids, state: { version: 1, exclusions } }
}

/**
 * The exclusion a report put in force, from the core's answer (its `excluded` event,
 * always emitted: warn is the highest level), in the seed's shape `{ id, kind, reason,
 * until? }`; undefined when it earned none or a stronger one stays.
 */
export function exclusionFrom(outputs, executor) {
  const event = outputs.find((o) => o.type === 'event' && o.name === 'excluded' && o.fields?.executor === executor)
  if (event === undefined) return undefined
  const { kind, reason, until } = event.fields
  return until === undefined ? { id: executor, kind, reason } : { id: executor, kind, reason, until }
}

/**
 * Builds the Roster class over a wasm API ({ Policy, merge, narrow, validate }) and a
 * platform ({ readRoster?, fileStore?, name }).
 */
export function defineRoster(api, platform) {
  const { Policy } = api

  /**
   * Merge and narrow as the seed does; every violation at once. With `deferred`, a
   * document with no id listed twice is not validated here (`validated: false`): the
   * Policy the caller builds from it validates it (`buildPolicy`), one walk fewer.
   */
  async function resolveDocument(options, deferred = false) {
    const violations = []
    const read = async (path, side) => {
      if (platform.readRoster === undefined) {
        throw new RotaError('INVALID_INPUT', `${side} is a file path, and this platform has no file system`)
      }
      const result = await platform.readRoster(path)
      if (result.violation !== undefined) violations.push(result.violation)
      return result.document
    }
    let user = options.document ?? null
    let repo = options.repoDocument ?? null
    if (options.rosterPath !== undefined) user = (await read(options.rosterPath, 'rosterPath')) ?? null
    if (options.repoRosterPath !== undefined) {
      repo = (await read(options.repoRosterPath, 'repoRosterPath')) ?? null
    }
    if (violations.length > 0) throw invalidDocument(violations)
    if (user === null && repo === null) {
      const where = [options.rosterPath, options.repoRosterPath].filter((p) => p !== undefined)
      throw invalidDocument([
        {
          path: '$',
          message:
            where.length > 0
              ? `no roster: ${where.join(' and ')} ${where.length > 1 ? 'do' : 'does'} not exist`
              : 'no roster: give `document` or `rosterPath`',
        },
      ])
    }
    // Merging keeps one entry per id, so an id listed twice in one file would vanish
    // silently: name it, with everything else wrong, before merging.
    const twice = [
      ...duplicates(user, options.rosterPath ?? 'document'),
      ...duplicates(repo, options.repoRosterPath ?? 'repoDocument'),
    ]
    if (deferred && twice.length === 0 && options.executors === undefined && typeof Policy.__fromRosters === 'function') {
      // Nothing to narrow: the Policy merges and builds in one call (`buildPolicy`),
      // the merged document never crossing into JS and back.
      return { unknown: [], warnings: [], validated: false, rosters: { user, repo, options } }
    }
    return mergeAndNarrow(options, user, repo, twice, deferred)
  }

  /** The rest of `resolveDocument`: merge, narrow, validate (unless `deferred`). */
  function mergeAndNarrow(options, user, repo, twice, deferred) {
    let merged
    try {
      merged = api.merge(user, repo)
    } catch (error) {
      if (error?.code !== 'INVALID_DOCUMENT') throw error
      throw invalidDocument([...twice, ...error.violations])
    }
    // `--executors a,b` as the seed's command line gives it, or a list.
    const ids =
      typeof options.executors === 'string'
        ? options.executors.split(',').map((id) => id.trim()).filter((id) => id !== '')
        : (list(options.executors, 'executors') ?? [])
    let narrowed
    if (ids.length === 0) {
      // Narrowing to no list keeps every executor: merge's document as it is.
      narrowed = { document: merged, unknown: [], warnings: [] }
    } else {
      try {
        // An id the roster does not have is ignored, as the seed does, with a warning
        // naming it (the core's); a reload may drop some of the run's filter this way.
        narrowed = api.narrow(merged, ids)
      } catch (error) {
        if (error?.code !== 'INVALID_DOCUMENT') throw error
        // Name everything else wrong with the document at once.
        throw invalidDocument([...twice, ...error.violations, ...api.validate(merged, options.options?.kinds)])
      }
    }
    const resolved = { document: narrowed.document, unknown: narrowed.unknown, warnings: narrowed.warnings }
    if (deferred && twice.length === 0) return { ...resolved, validated: false }
    const found = [...twice, ...api.validate(narrowed.document, options.options?.kinds)]
    if (found.length > 0) throw invalidDocument(found)
    return { ...resolved, validated: true }
  }

  /**
   * The Policy of a resolved document. One `resolveDocument` left unvalidated is
   * validated by the constructor; its refusal is then worded as `resolveDocument`'s
   * (INVALID_DOCUMENT with every violation, before any error in the options).
   */
  function buildPolicy({ document, validated, rosters }, coreOptions, kinds) {
    if (rosters !== undefined) {
      const { user, repo, options } = rosters
      try {
        return Policy.__fromRosters(user, repo, coreOptions)
      } catch {
        // Refused: the two-step path words the refusal exactly as it always has.
        return buildPolicy(mergeAndNarrow(options, user, repo, [], true), coreOptions, kinds)
      }
    }
    try {
      return new Policy(document, coreOptions)
    } catch (error) {
      if (validated) throw error
      const found = api.validate(document, kinds)
      if (found.length > 0) throw invalidDocument(found)
      throw error
    }
  }

  // The core's probe rule (`probeIsUp`): 2xx is up; a redirect is not followed and is
  // down (in a browser, `manual` gives an opaque redirect with status 0: down too).
  const defaultProbe = async (url, { signal }) => {
    const response = await fetch(url, { signal, redirect: 'manual' })
    try {
      await response.body?.cancel()
    } catch {
      // the status is all a health check needs
    }
    return Number.isInteger(response.status) && api.probeIsUp(response.status)
  }

  /**
   * `shared`: a replica of a roster whose inputs are a log on PostgreSQL
   * (src/shared/roster.js, loaded only here so that the embedded roster and the
   * browser never load `pg`).
   */
  async function createShared(options) {
    if (platform.sharedRoster === undefined) {
      throw new RotaError('INVALID_INPUT', `Roster.create: a shared roster needs Node (PostgreSQL through the 'pg' package); this is the ${platform.name} build`)
    }
    const wrong = []
    if (options.statePath !== undefined || options.state !== undefined) {
      wrong.push('a shared roster has no state file (statePath, state): the log on PostgreSQL is its persistence')
    }
    if (options.preflight !== undefined) wrong.push('a shared roster does not preflight (log version 1): drop preflight')
    if (options.watch === true) wrong.push('a shared roster does not watch roster files: call reload()')
    if (options.now !== undefined) wrong.push("a shared roster runs on the log's clock (the database's): drop now")
    if (wrong.length > 0) throw new RotaError('INVALID_INPUT', `Roster.create: ${wrong.join('; ')}`)
    const { createSharedRoster } = await platform.sharedRoster()
    return createSharedRoster(options, {
      api,
      resolveDocument,
      defaultProbe,
      emitter: platform.emitter?.() ?? emitterOverTarget(),
    })
  }

  class Roster {
    static {
      defineQueries(
        this,
        (roster) => roster.#policy,
        (roster) => roster.#emitter,
        (roster) => {
          roster.#listened = true
        },
      )
    }

    #policy
    /** `policy[DRIVER_STEP]` */
    #driverStep
    #options
    #clock
    #emitter = platform.emitter?.() ?? emitterOverTarget()
    /**
     * Whether a listener was ever added (`on`, `once`, `onEvent`): until then both
     * listener counts are 0 without asking the emitter. (`off` leaves it set.)
     */
    #listened = false
    #store
    #probe
    #probeTimeoutMs
    #machines
    #preflight
    /** request id → { kind, role, label, resolve, reject, cleanup, timeoutMs } */
    #pending = new PendingRequests()
    #requestSeq = 0
    #timer
    #timerAt
    #lastTickAt
    #closing = false
    #closed = false
    #closePromise
    #closeController = new AbortController()
    #probing = new Set()
    #inflight = new Set()
    #saveQueue = []
    #saving
    /** Failed write attempts in a row, and the timer of the next one. */
    #saveFailures = 0
    #saveRetry
    #specs
    /** role → requests waiting in the core's queue (a `waiting` output, not settled) */
    #queued = new Map()
    #queuedTotal = 0
    /** role → { n: leases held (granted or occupied, not released) }: one lookup a change */
    #held = new Map()
    #heldTotal = 0
    /** Waiters that keep a Node process alive: those with `timeoutMs` or a `signal`. */
    #keepAliveWaiters = 0
    #keepAlive
    #metrics
    #unwatch

    /** Use `Roster.create`. */
    constructor(token, policy, options, store) {
      if (token !== constructing) throw new TypeError('use Roster.create(options)')
      this.#policy = policy
      // (A module another buildApi wrapped first has only HANDLE_AT_LEVEL: the same answers.)
      this.#driverStep = policy[DRIVER_STEP] ?? policy[HANDLE_AT_LEVEL]
      this.#options = options
      this.#clock = options.now ?? Date.now
      this.#store = store
      this.#probe = options.probe === false ? undefined : (options.probe ?? defaultProbe)
      this.#probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS
      this.#machines = options.machines
      this.#preflight = options.preflight
      if (typeof options.onEvent === 'function') {
        this.#listened = true
        this.#emitter.on('event', options.onEvent)
      }
      this.#metrics = new Metrics(options.meter, () => this.#queueByRole())
    }

    /**
     * Reads and merges the roster (the user's, then the repository's over it),
     * narrows it to `executors`, validates it (every violation at once), restores the
     * state file, and starts.
     */
    static async create(options = {}) {
      if (options === null || typeof options !== 'object') {
        throw new RotaError('INVALID_INPUT', 'Roster.create takes an options object')
      }
      checkOptions(options)
      if (options.shared !== undefined) return createShared(options)
      const resolved = await resolveDocument(options, true)
      const { unknown, warnings } = resolved
      const coreOptions = { ...options.options }
      if (coreOptions.canProbe === undefined) coreOptions.canProbe = options.probe !== false
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
      const roster = new Roster(constructing, policy, options, store)
      // A clock that cannot give a time fails the start, not a later timer.
      roster.#now()
      if (coreOptions.preflight === true) roster.#starting = { awaiting: new Set() }
      roster.#narrowWarnings(unknown, warnings)
      // (Only with a listener: the document crosses from the module in full.)
      if (roster.#emitter.listenerCount('event') > 0) roster.#secretWarnings(policy.document())
      await roster.#restore()
      if (roster.#starting !== undefined) await roster.#start()
      roster.#arm()
      if (options.watch === true) roster.#watch()
      return roster
    }

    /** `watch: true`: reload when a roster file changes; a bad edit is an event, the roster runs on. */
    #watch() {
      if (platform.watchRoster === undefined) {
        throw new RotaError('INVALID_INPUT', 'watch needs a file system (Node)')
      }
      const paths = [this.#options.rosterPath, this.#options.repoRosterPath].filter((p) => p !== undefined)
      let running = Promise.resolve()
      const reload = () => {
        running = running.then(async () => {
          if (this.#closing) return
          try {
            await this.reload()
          } catch (error) {
            if (this.#closing) return
            this.#event('warn', 'reloadFailed', `the changed roster file was not applied: ${error?.message ?? error}`, {
              paths,
              error: String(error?.message ?? error),
              ...(error?.violations === undefined ? {} : { violations: error.violations }),
            })
          }
        })
        this.#track(running)
      }
      try {
        this.#unwatch = platform.watchRoster(paths, reload)
      } catch (error) {
        this.#event('warn', 'watchFailed', `cannot watch ${paths.join(' and ')}: ${error?.message ?? error}`, {
          paths,
          error: String(error?.message ?? error),
        })
      }
    }

    // ---- the run loop ----------------------------------------------------------

    /**
     * The clock's time: whole epoch milliseconds, as every input's `now` must be
     * (rota_core::limits::MAX_SAFE_INTEGER at most). A clock that gives anything else
     * (NaN, a fraction, a negative, Infinity, not a number) throws INVALID_INPUT
     * naming it, rather than running the roster at a made-up time.
     */
    #now() {
      const time = this.#clock()
      const now = time instanceof Date ? time.getTime() : time
      if (typeof now !== 'number' || !Number.isSafeInteger(now) || now < 0) {
        throw new RotaError(
          'INVALID_INPUT',
          `invalid input: the clock (options.now) gave ${typeof now === 'number' ? String(now) : typeof now}; it must give whole epoch milliseconds from 0 to ${Number.MAX_SAFE_INTEGER}`,
        )
      }
      return now
    }

    /** Feeds one input, handles every output, re-arms the timer. Throws a rejected input. */
    #step(input) {
      const emitter = this.#emitter
      const outputsHeard = this.#listened && emitter.listenerCount('output') > 0
      const eventsHeard = outputsHeard || (this.#listened && emitter.listenerCount('event') > 0)
      // Without a state file, the persist outputs concern only a listener of raw outputs.
      const minLevel = (eventsHeard ? 0 : LEVEL_WARN) | (this.#store === undefined && !outputsHeard ? NO_PERSIST : 0)
      const { outputs, wakeAt } = this.#driverStep.call(this.#policy, input, minLevel)
      // Kept before dispatching: a listener may feed another input, whose answer is later.
      this.#wakeAt = wakeAt
      this.#lastNow = input.now
      if (input.type === 'reload' || input.type === 'preflightResult') this.#specs = undefined
      for (const output of outputs) this.#dispatch(output)
      this.#arm()
      return outputs
    }

    /** The core's latest wake-up and input time (from the last answer). */
    #wakeAt = null
    #lastNow = 0

    /** A step whose failure is reported as an event (results that come back late). */
    #stepQuietly(input) {
      if (this.#closed) return undefined
      try {
        return this.#step(input)
      } catch (error) {
        this.#event('warn', 'inputRejected', `the core rejected a ${input.type}: ${error.message}`, {
          input: input.type,
          code: error.code,
        })
        return undefined
      }
    }

    #arm() {
      if (this.#closed) return
      const at = this.#wakeAt
      const none = at === undefined || at === null
      // A timer armed for no later than `at` stays (issue 15: each report of a rotation
      // moves the wake-up later, and re-arming cost a clearTimeout and a setTimeout):
      // its early tick is harmless, and the core's answer to it arms the next.
      if (this.#timer !== undefined && (none || at >= this.#timerAt)) return
      // No wake-up wanted and no timer armed (most steps of a steady roster).
      if (none && this.#timer === undefined) return
      clearTimeout(this.#timer)
      this.#timer = undefined
      this.#timerAt = undefined
      if (none) return
      const now = this.#now()
      // A wake-up at or before a time already ticked would spin: wait a second instead.
      const delay = this.#lastTickAt !== undefined && at <= this.#lastTickAt ? 1_000 : at - now
      this.#timerAt = at
      this.#timer = setTimeout(() => {
        this.#timer = undefined
        this.#timerAt = undefined
        try {
          this.tick()
        } catch (error) {
          // Only the clock can throw here (tick's input is never rejected).
          this.#event('warn', 'clockFailed', error.message, { code: error.code })
        }
      }, Math.min(Math.max(0, delay), MAX_TIMER_MS))
      // The timer never keeps a process alive on its own (probes, exclusion ends).
      if (typeof this.#timer === 'object') this.#timer.unref?.()
    }

    /**
     * While a lease with `timeoutMs` or a `signal` waits, a Node process stays alive:
     * its promise must settle (a signal's abort may come from a timer that does not
     * hold the process, as `AbortSignal.timeout()`'s does not).
     */
    #keepAliveChange(delta) {
      this.#keepAliveWaiters += delta
      if (this.#keepAliveWaiters > 0 && this.#keepAlive === undefined && !this.#closed) {
        this.#keepAlive = setInterval(() => {}, MAX_TIMER_MS)
      } else if (this.#keepAliveWaiters === 0 && this.#keepAlive !== undefined) {
        clearInterval(this.#keepAlive)
        this.#keepAlive = undefined
      }
    }

    /** Feeds a `tick` at `now()`. The timer does this; tests on virtual time call it. */
    tick() {
      if (this.#closed) return
      const now = this.#now()
      this.#lastTickAt = now
      this.#stepQuietly({ type: 'tick', now })
    }

    /**
     * What the roster does with each of the core's outputs, by its `type`: one entry
     * per output type of the protocol. An output of a type not here is said as a
     * warn `unknownOutput` event, never dropped without a word.
     */
    static #handlers = new Map([
      ['granted', (r, output) => r.#granted(output)],
      [
        'exhausted',
        (r, output) => {
          const pending = r.#settle(output.request)
          return pending?.reject(exhausted(output, pending.label, pending.input && r.#explainQuietly(pending.input)))
        },
      ],
      [
        'timedOut',
        (r, output) => {
          const pending = r.#settle(output.request)
          return pending?.reject(r.#timeoutError(output.request, pending, undefined, output.reasons))
        },
      ],
      ['unavailable', (r, output) => r.#settle(output.request)?.resolve(undefined)],
      [
        'cancelled',
        (r, output) => {
          const pending = r.#settle(output.request)
          return pending?.reject(pending.abortReason ?? closed('the roster closed before a lease was granted'))
        },
      ],
      ['waiting', (r, output) => r.#waiting(output)],
      [
        'probe',
        (r, output) => {
          r.#metrics.probed()
          return r.#startProbe(output)
        },
      ],
      ['createMachine', (r, output) => r.#createMachine(output)],
      ['deleteMachine', (r, output) => r.#deleteMachine(output)],
      [
        'preflight',
        (r, output) => {
          r.#starting?.awaiting.add(output.executor)
          return r.#runPreflight(output)
        },
      ],
      ['startFailed', (r, output) => r.#startFailed(output)],
      ['persist', (r, output) => r.#persist(output)],
      ['event', (r, output) => r.#coreEvent(output)],
    ])

    #dispatch(output) {
      if (this.#listened && this.#emitter.listenerCount('output') > 0) this.#emitter.emit('output', output)
      const handle = Roster.#handlers.get(output.type)
      if (handle !== undefined) return handle(this, output)
      return this.#event('warn', 'unknownOutput', `roster: the core gave an output of type ${JSON.stringify(output.type)}, which this driver does not know`, {
        type: output.type,
      })
    }

    #waiting(output) {
      const pending = this.#pending.get(output.request)
      if (pending === undefined) return undefined
      pending.report = output.report
      if (!pending.queued) {
        pending.queued = true
        this.#count(this.#queued, pending.role, 1)
        this.#queuedTotal += 1
      }
      return undefined
    }

    #coreEvent(output) {
      if (output.name === 'excluded') this.#metrics.excluded(output.fields?.kind)
      if (!this.#listened || this.#emitter.listenerCount('event') === 0) return undefined
      return this.#emitter.emit('event', {
        level: output.level,
        name: output.name,
        message: output.message,
        fields: output.fields,
        time: this.#lastNow,
      })
    }

    /** `executors` named ids the roster does not have: ignored (as the seed does), and said. */
    #narrowWarnings(unknown, warnings) {
      for (const warning of warnings ?? []) {
        this.#event('warn', 'narrowIgnored', `roster: ${warning.message}`, { executors: unknown ?? [] })
      }
    }

    /**
     * A literal secret in an executor's `env` (the core's `check` finds it): a warning
     * event per value, naming its place, never the value. The document still runs.
     */
    #secretWarnings(document) {
      if (this.#emitter.listenerCount('event') === 0) return
      let found
      try {
        found = api.check(document, this.#options.options?.kinds).warnings
      } catch {
        return
      }
      for (const warning of found ?? []) {
        this.#event('warn', 'literalSecret', `roster: ${warning.message}`, { path: warning.path })
      }
    }

    #event(level, name, message, fields = {}) {
      let time
      try {
        time = this.#now()
      } catch {
        time = this.#lastNow
      }
      this.#emitter.emit('event', { level, name, message, fields, time })
    }

    /** Removes a pending request and its abort listener; returns it. */
    #settle(request) {
      const pending = this.#pending.get(request)
      if (pending === undefined) return undefined
      this.#pending.delete(request)
      pending.cleanup?.()
      if (pending.queued) {
        this.#count(this.#queued, pending.role, -1)
        this.#queuedTotal -= 1
      }
      if (pending.keepsAlive) this.#keepAliveChange(-1)
      return pending
    }

    #count(map, role, delta) {
      map.set(role, (map.get(role) ?? 0) + delta)
    }

    #heldOf(role) {
      let held = this.#held.get(role)
      if (held === undefined) this.#held.set(role, (held = { n: 0 }))
      return held
    }

    /** `explain` of a request's constraints, or undefined if the core refuses it. */
    #explainQuietly({ role, avoid, prefer, pin }) {
      try {
        return this.#policy.explain(omitUndefined({ role, avoid, prefer, pin }))
      } catch {
        return undefined
      }
    }

    #timeoutError(request, pending, cause, reasons) {
      return timedOut({
        request,
        role: pending.role,
        timeoutMs: pending.timeoutMs,
        label: pending.label,
        reasons,
        report: pending.report,
        explanation: pending.input && this.#explainQuietly(pending.input),
        cause,
      })
    }

    #spec(id) {
      if (this.#specs === undefined) {
        this.#specs = new Map()
        for (const spec of this.#policy.document()?.executors ?? []) this.#specs.set(spec.id, spec)
      }
      return this.#specs.get(id) ?? { id }
    }

    #granted(output) {
      const pending = this.#settle(output.request)
      const lease = new Lease(output, this.#spec(output.executor), this.#releaseLease, this.#lastNow)
      this.#heldOf(lease.role).n += 1
      this.#heldTotal += 1
      if (output.occupied === true) this.#metrics.leaseOccupied()
      else this.#metrics.leaseGranted(this.#lastNow - (pending?.input?.now ?? this.#lastNow))
      if (pending === undefined) {
        // Nobody waits for it any more: give it straight back, leak nothing.
        lease.release()
        return
      }
      pending.resolve(lease)
    }

    #releaseLease = (lease, role) => {
      this.#heldOf(role).n -= 1
      this.#heldTotal -= 1
      if (this.#closed) return
      this.#stepQuietly({ type: 'release', now: this.#now(), lease })
    }

    #track(promise) {
      this.#inflight.add(promise)
      const done = () => this.#inflight.delete(promise)
      // (then with both handlers: a rejection here must not become an unhandled one)
      promise.then(done, done)
      return promise
    }

    // ---- effects ------------------------------------------------------------------

    #startProbe({ executor, url }) {
      if (this.#probing.has(executor)) return
      const probe = this.#probe
      if (probe === undefined) {
        queueMicrotask(() => this.#stepQuietly({ type: 'probeResult', now: this.#now(), executor, up: false }))
        return
      }
      this.#probing.add(executor)
      const timeout = AbortSignal.timeout(this.#probeTimeoutMs)
      const signal =
        typeof AbortSignal.any === 'function'
          ? AbortSignal.any([timeout, this.#closeController.signal])
          : timeout
      // A probe that ignores its signal still ends at the timeout (or close): it must
      // not stop this executor's probing, nor hold close() up.
      const ended = untilAborted([timeout, this.#closeController.signal])
      const run = (async () => {
        let up = false
        try {
          up = (await Promise.race([probe(url, { signal, executor, timeoutMs: this.#probeTimeoutMs }), ended.promise])) === true
        } catch (error) {
          this.#event('debug', 'probeFailed', `health probe of ${executor} at ${url} failed: ${error?.message ?? error}`, {
            executor,
            url,
          })
        }
        ended.cancel()
        this.#probing.delete(executor)
        this.#stepQuietly({ type: 'probeResult', now: this.#now(), executor, up })
      })()
      this.#track(run)
    }

    #createMachine({ request, executor }) {
      const create = this.#machines?.create
      const pending = this.#pending.get(request)
      const run = (async () => {
        let hold
        try {
          if (typeof create !== 'function') {
            throw new Error('this roster has no machines.create callback')
          }
          hold = await create({
            executor,
            request,
            role: pending?.role,
            spec: this.#spec(executor),
            signal: this.#closeController.signal,
          })
        } catch (error) {
          this.#stepQuietly({
            type: 'machineFailed',
            now: this.#now(),
            id: request,
            message: String(error?.message ?? error),
          })
          return
        }
        if (this.#closed) {
          // Too late for anyone: delete it rather than leak it.
          await this.#deleteMachine({ executor, hold })
          return
        }
        this.#stepQuietly({ type: 'machineCreated', now: this.#now(), id: request, hold: hold ?? null })
      })()
      this.#track(run)
    }

    /**
     * Deletes a machine. With a `lease`, the core holds that lease's slot until the
     * answer (`machineDeleted`); a failure frees it too, and the core's warning names
     * the machine for a sweep.
     */
    #deleteMachine({ executor, hold, lease }) {
      const remove = this.#machines?.delete
      const answer = (ok, error) => {
        if (lease === undefined) return
        this.#stepQuietly(omitUndefined({ type: 'machineDeleted', now: this.#now(), lease, ok, error }))
      }
      if (typeof remove !== 'function') {
        this.#event('warn', 'machineNotDeleted', `no machines.delete callback: machine of ${executor} left running`, {
          executor,
          hold,
        })
        answer(false, 'this roster has no machines.delete callback')
        return Promise.resolve()
      }
      const run = (async () => {
        try {
          await remove({ executor, hold, spec: this.#spec(executor) })
        } catch (error) {
          const message = String(error?.message ?? error)
          if (lease === undefined) {
            this.#event('warn', 'machineDeleteFailed', `deleting a machine of ${executor} failed: ${message}`, {
              executor,
              hold,
            })
          }
          answer(false, message)
          return
        }
        answer(true)
      })()
      return this.#track(run)
    }

    /**
     * The startup preflight: the core asked for every executor's when it was built
     * (those outputs come with the first answer); the roster serves once they all
     * pass. A failure closes it and rejects PREFLIGHT_FAILED.
     */
    #starting
    async #start() {
      const starting = this.#starting
      const done = new Promise((resolve, reject) => Object.assign(starting, { resolve, reject }))
      this.#stepQuietly({ type: 'tick', now: this.#now() })
      if (starting.failed === undefined && starting.awaiting.size === 0) this.#starting = undefined
      else {
        try {
          if (starting.failed !== undefined) throw starting.failed
          await done
        } catch (error) {
          this.#starting = undefined
          await this.close()
          throw error
        }
      }
    }

    /** A startup preflight answered (`#runPreflight` fed it to the core). */
    #startAnswered(executor) {
      const starting = this.#starting
      if (starting === undefined || starting.failed !== undefined) return
      starting.awaiting.delete(executor)
      if (starting.awaiting.size === 0) {
        this.#starting = undefined
        starting.resolve?.()
      }
    }

    #startFailed({ executor, error }) {
      const starting = this.#starting
      if (starting === undefined) return
      starting.failed = new RotaError('PREFLIGHT_FAILED', `the roster does not start: the preflight of ${executor} failed (${error})`, {
        executor,
        error,
      })
      starting.reject?.(starting.failed)
    }

    #runPreflight({ executor }) {
      const preflight = this.#preflight
      const run = (async () => {
        let ok = true
        let error
        try {
          if (typeof preflight === 'function') {
            const result = await preflight({
              executor,
              spec: this.#pendingSpec(executor),
              signal: this.#closeController.signal,
            })
            if (result === false) {
              ok = false
              error = 'the preflight answered false'
            }
          }
        } catch (cause) {
          ok = false
          error = String(cause?.message ?? cause)
        }
        this.#stepQuietly(omitUndefined({ type: 'preflightResult', now: this.#now(), executor, ok, error }))
        this.#startAnswered(executor)
      })()
      this.#track(run)
    }

    /** The spec of an executor in a reload that waits for its preflight. */
    #pendingSpec(executor) {
      const pending = this.#pendingDocument
      return pending?.executors?.find((e) => e.id === executor) ?? this.#spec(executor)
    }

    #pendingDocument

    #persist({ ids, state }) {
      if (this.#store === undefined) return
      this.#saveQueue.push({ ids, state })
      // After a failure the retry timer writes it, with what else came meanwhile.
      if (this.#saving === undefined && this.#saveRetry === undefined) this.#saving = this.#track(this.#drainSaves())
    }

    /**
     * Writes what is queued, one write at a time; updates that arrive meanwhile are
     * written together next. A failed write keeps its updates and is tried again after
     * a back-off (stateRetry: 500 ms doubling to 30 s), merged again with what came
     * since, until the store holds every pending entry.
     */
    async #drainSaves() {
      while (this.#saveQueue.length > 0) {
        const update = combineUpdates(this.#saveQueue.splice(0))
        try {
          await this.#store.save(update, { now: this.#now(), event: this.#storeEvent })
          this.#metrics.stateWritten()
          if (this.#saveFailures > 0) {
            this.#event('info', 'stateFileRecovered', `the roster state is written again after ${this.#saveFailures} failed attempts`, {
              ...this.#statePathField(),
              attempts: this.#saveFailures,
            })
            this.#saveFailures = 0
          }
        } catch (error) {
          this.#saveQueue.unshift(update)
          this.#saveFailures += 1
          const { firstMs = 500, maxMs = 30_000 } = this.#options.stateRetry ?? {}
          const retryInMs = Math.min(firstMs * 2 ** Math.min(this.#saveFailures - 1, 20), maxMs)
          const unreadable = error?.code === 'STATE_FILE_UNREADABLE'
          const again = this.#closing ? 'the roster is closing, not retrying' : `retrying in ${retryInMs} ms`
          this.#event(
            'warn',
            unreadable ? 'stateFileUnreadable' : 'stateFileWriteFailed',
            `could not save the roster state (${error?.message ?? error}): ${update.ids.length} changed executors kept; ${again}`,
            { ...this.#statePathField(), error: String(error?.message ?? error), retryInMs: this.#closing ? 0 : retryInMs },
          )
          if (!this.#closing) {
            this.#saveRetry = setTimeout(() => {
              this.#saveRetry = undefined
              if (this.#saving === undefined && !this.#closed) this.#saving = this.#track(this.#drainSaves())
            }, retryInMs)
            // Kept referenced: unwritten changes keep the process alive until they land
            // (or `close()` gives up after one more try).
          }
          break
        }
      }
      this.#saving = undefined
    }

    #statePathField() {
      return this.#store?.path === undefined ? {} : { path: this.#store.path }
    }

    #storeEvent = (level, name, message, fields) => this.#event(level, name, message, fields)

    async #restore() {
      if (this.#store === undefined) return
      let state
      try {
        state = await this.#store.load({ now: this.#now(), event: this.#storeEvent })
      } catch (error) {
        // Never written over: saves read it again (and retry) until it can be read.
        // (Another failure, a lock held too long say, is named as a failed write is.)
        const name = error?.code === 'STATE_FILE_UNREADABLE' || error?.code === undefined ? 'stateFileUnreadable' : 'stateFileWriteFailed'
        this.#event('warn', name, `could not read the roster state; starting without it: ${error?.message ?? error}`, {
          ...this.#statePathField(),
          error: String(error?.message ?? error),
        })
        return
      }
      if (state === undefined || state === null) return
      try {
        this.#step({ type: 'restore', now: this.#now(), state })
      } catch (error) {
        const message = `the roster state is not one rota reads (${error.message})`
        if (typeof this.#store.discard === 'function') {
          await this.#store.discard(message, { now: this.#now(), event: this.#storeEvent })
        } else {
          this.#event('warn', 'stateFileCorrupt', `${message}; starting clean`, { error: error.message })
        }
      }
    }

    // ---- leases ---------------------------------------------------------------------

    #checkOpen() {
      if (this.#closing) throw closed()
    }

    #requestInput(type, role, options) {
      if (options === null || typeof options !== 'object') {
        throw new RotaError('INVALID_INPUT', `${type} options must be an object`)
      }
      const now = this.#now()
      const id = options.id ?? this.#nextId()
      let deadline
      if (options.timeoutMs !== undefined) {
        const ms = Number(options.timeoutMs)
        if (!Number.isFinite(ms) || ms < 0) {
          throw new RotaError('INVALID_INPUT', `timeoutMs must be a number of milliseconds, not ${options.timeoutMs}`)
        }
        deadline = now + Math.ceil(ms)
      }
      // Built field by field (the hot path of every lease): only the fields given.
      const input = { type, now, id, role }
      const avoid = list(options.avoid, 'avoid')
      if (avoid !== undefined) input.avoid = avoid
      if (options.prefer !== undefined) input.prefer = options.prefer
      if (options.pin !== undefined) input.pin = options.pin
      if (options.rank !== undefined) input.rank = options.rank
      const eventTime = options.eventTime instanceof Date ? options.eventTime.getTime() : options.eventTime
      if (eventTime !== undefined) input.eventTime = eventTime
      if (options.label !== undefined) input.label = options.label
      if (deadline !== undefined) input.deadline = deadline
      return input
    }

    /**
     * Waits for a slot. Rejects `EXHAUSTED` when no executor outside `avoid` can ever
     * take the role, `TIMEOUT` after `timeoutMs`, `ABORT_ERR` when `signal` aborts.
     */
    lease(role, options = NO_OPTIONS) {
      return this.#request('lease', role, options)
    }

    /** A slot now, or `undefined`. (Async because a provisioned executor first makes a machine.) */
    tryLease(role, options = NO_OPTIONS) {
      return this.#request('tryLease', role, options)
    }

    /**
     * A request id of the driver's own (`r<n>`), never one in use: a caller's `r2` is
     * skipped here, and one the core still knows (a live lease's) is skipped when the
     * core answers DUPLICATE_REQUEST (see #stepWithOwnId).
     */
    #nextId() {
      let id
      do id = `r${++this.#requestSeq}`
      while (this.#pending.has(id))
      return id
    }

    /**
     * Feeds a request; a generated id the core already knows is replaced, its pending
     * entry set under the new id, and fed again.
     */
    #stepWithOwnId(input, generated, pending) {
      for (;;) {
        try {
          return this.#step(input)
        } catch (error) {
          if (!generated || error?.code !== 'DUPLICATE_REQUEST') throw error
          // The refused id's entry moves to the new one (it is no request's any more).
          if (this.#pending.get(input.id) === pending) this.#pending.delete(input.id)
          input.id = this.#nextId()
          this.#pending.set(input.id, pending)
        }
      }
    }

    #request(type, role, options) {
      let pending
      try {
        this.#checkOpen()
        if (options === null || typeof options !== 'object') {
          throw new RotaError('INVALID_INPUT', `${type} options must be an object`)
        }
        const signal = options.signal
        if (signal !== undefined && !isAbortSignal(signal)) {
          throw new RotaError('INVALID_INPUT', `signal must be an AbortSignal, not ${signal === null ? 'null' : typeof signal}`)
        }
        if (signal?.aborted) return Promise.reject(this.#abortError(signal, { role, label: options.label }))
        const input = this.#requestInput(type, role, options)
        if (this.#pending.has(input.id)) {
          throw new RotaError('DUPLICATE_REQUEST', `request id '${input.id}' is already in use by a live request`)
        }
        pending = new PendingRequest(type, role, options.label, options.timeoutMs, input)
        if (signal !== undefined) {
          const onAbort = () => {
            if (this.#pending.get(input.id) !== pending) return
            pending.abortReason = this.#abortError(signal, pending, input.id)
            if (!this.#stepQuietly({ type: 'cancel', now: this.#now(), id: input.id })) {
              // The core no longer knows it: settle here so nobody hangs.
              this.#settle(input.id)?.reject(pending.abortReason)
            }
          }
          signal.addEventListener('abort', onAbort, { once: true })
          pending.cleanup = () => signal.removeEventListener('abort', onAbort)
        }
        this.#pending.set(input.id, pending)
        if (pending.timeoutMs !== undefined || signal !== undefined) {
          pending.keepsAlive = true
          this.#keepAliveChange(1)
        }
      } catch (error) {
        return Promise.reject(error)
      }
      const input = pending.input
      try {
        this.#stepWithOwnId(input, options.id === undefined, pending)
      } catch (error) {
        this.#settle(input.id)
        pending.reject(error)
      }
      // Granted (or refused) by that step, mostly: then an already settled promise.
      return pending.promise()
    }

    /**
     * What an aborted lease rejects with: the signal's reason, as `fetch` does; a
     * timeout signal's (`AbortSignal.timeout()`) is a TIMEOUT saying why, with that
     * reason as its cause.
     */
    #abortError(signal, pending, request) {
      const reason = signal.reason
      if (reason?.name === 'TimeoutError') return this.#timeoutError(request, pending, reason)
      return reason === undefined ? aborted(reason) : reason
    }

    /**
     * Records work already running on an executor after a restart: it takes a slot
     * even beyond capacity. Returns its lease.
     */
    occupy(executor, options = {}) {
      this.#checkOpen()
      if (options === null || typeof options !== 'object') {
        throw new RotaError('INVALID_INPUT', 'occupy options must be an object')
      }
      const generated = options.id === undefined
      let id = options.id ?? this.#nextId()
      // A waiting request's id is refused before anything changes (the core would
      // refuse it too, but its pending entry here is the waiter's, not ours).
      if (this.#pending.has(id)) {
        throw new RotaError('DUPLICATE_REQUEST', `request id '${id}' is already in use by a live request`)
      }
      const pending = new PendingRequest('occupy', options.role, undefined, undefined, undefined)
      this.#pending.set(id, pending)
      try {
        const input = omitUndefined({ type: 'occupy', now: this.#now(), id, executor, role: options.role, hold: options.hold })
        for (;;) {
          try {
            this.#step(input)
            break
          } catch (error) {
            // A generated id the core already knows: the next one, its entry moved.
            if (!generated || error?.code !== 'DUPLICATE_REQUEST') throw error
            input.id = this.#nextId()
            this.#pending.delete(id)
            id = input.id
            this.#pending.set(id, pending)
          }
        }
      } finally {
        if (this.#pending.get(id) === pending) this.#pending.delete(id)
      }
      // Its lease, granted by that step (never rejected: the core refuses by throwing).
      return pending.settled === 1 ? pending.value : undefined
    }

    /**
     * Leases, runs `fn(lease)`, reports what it throws (then rethrows it) and releases:
     * generic-pool's `use`. Resolves with what `fn` returns. `report: false` leaves
     * failures unreported.
     */
    async use(role, fn, options = {}) {
      if (typeof fn !== 'function') {
        throw new RotaError('INVALID_INPUT', `use(role, fn): fn must be a function, not ${fn === null ? 'null' : typeof fn}`)
      }
      const { report = true, ...leaseOptions } = options ?? {}
      const lease = await this.lease(role, leaseOptions)
      try {
        return await fn(lease)
      } catch (error) {
        if (report !== false && !this.#closing) {
          try {
            this.report(lease.executorId, error)
          } catch {
            // A report the core refuses must not hide the caller's own error.
          }
        }
        throw error
      } finally {
        lease.release()
      }
    }

    // ---- failures and exclusions ------------------------------------------------------

    /**
     * Reports a failed call on an executor: a real error (its facts extracted with
     * `failureFacts`, classified by the core with the document's signals) or an
     * already-classified `{ kind, message, resetAt?, retryAfterMs? }`.
     * Returns the exclusion it earned, if any.
     */
    report(executor, error) {
      this.#checkOpen()
      if (error !== null && typeof error === 'object' && !(error instanceof Error) && 'kind' in error && !FAILURE_KINDS.includes(error.kind)) {
        // A classified failure with a kind this package does not know would count as
        // `other` (excluding nothing) without a word: refuse it.
        throw new RotaError('INVALID_INPUT', `unknown failure kind ${JSON.stringify(error.kind)}: one of ${FAILURE_KINDS.join(', ')}`)
      }
      const now = this.#now()
      const failure = failureFacts(error, { now })
      const outputs = this.#step({ type: 'report', now, executor, failure })
      return exclusionFrom(outputs, executor)
    }

    /** The kind the core gives `error` with this roster's signals, reporting nothing: `{ kind, rule }`. */
    classify(error) {
      this.#checkOpen()
      return this.#policy.classify(failureFacts(error, { now: this.#now() }))
    }

    /**
     * Takes an executor out of the round: `exclude(id, { kind, reason, until })`, or
     * the seed's `exclude({ id, kind, reason, until })`. Kind defaults to `manual`.
     */
    exclude(executor, options = {}) {
      this.#checkOpen()
      const spec = typeof executor === 'object' && executor !== null ? executor : { ...options, id: executor }
      const until = spec.until instanceof Date ? spec.until.getTime() : spec.until
      this.#step(
        omitUndefined({
          type: 'exclude',
          now: this.#now(),
          executor: spec.id,
          kind: spec.kind,
          reason: spec.reason,
          until,
        }),
      )
    }

    /** Ends an executor's exclusion, whatever its kind. */
    resume(executor) {
      this.#checkOpen()
      this.#step({ type: 'resume', now: this.#now(), executor })
    }

    /**
     * Replaces the roster live. Without a document, re-reads `rosterPath` and
     * `repoRosterPath` (merged and narrowed as at create). Rejects INVALID_DOCUMENT
     * and changes nothing.
     */
    async reload(document) {
      this.#checkOpen()
      const { document: next, unknown, warnings } =
        document === undefined
          ? await resolveDocument(this.#options)
          : await resolveDocument({
              ...this.#options,
              document,
              repoDocument: undefined,
              rosterPath: undefined,
              repoRosterPath: undefined,
            })
      this.#checkOpen()
      this.#narrowWarnings(unknown, warnings)
      this.#secretWarnings(next)
      this.#pendingDocument = next
      this.#step({ type: 'reload', now: this.#now(), document: next })
    }

    // ---- queries (they change nothing): `defineQueries` adds the policy's --------------

    get closed() {
      return this.#closing
    }

    /** Lease requests waiting in the queue (all roles), counted as they come and go. */
    get waiting() {
      return this.#queuedTotal
    }

    /** Leases held (granted or occupied, not yet released). */
    get leased() {
      return this.#heldTotal
    }

    /** `{ waiting, leased }` of one role. */
    counts(role) {
      return { waiting: this.#queued.get(role) ?? 0, leased: this.#held.get(role)?.n ?? 0 }
    }

    /** Waiting requests of every role of the running document (for the queue-length gauge). */
    #queueByRole() {
      const roles = this.#closed ? [...this.#queued.keys()] : this.#policy.snapshot().roles
      return new Map(roles.map((role) => [role, this.#queued.get(role) ?? 0]))
    }

    /**
     * The roster's metrics as Prometheus text: rota_leases_granted_total,
     * rota_lease_wait_seconds, rota_exclusions_total{kind}, rota_probes_total,
     * rota_queue_length{role}, rota_state_writes_total.
     */
    metrics() {
      return this.#metrics.prometheus()
    }

    // ---- lifecycle ------------------------------------------------------------------------

    /** Resolves when no probe, machine callback or state write is in flight. */
    async idle() {
      while (this.#inflight.size > 0) {
        await Promise.allSettled([...this.#inflight])
      }
    }

    /**
     * Stops: waiting requests reject CLOSED, probes abort, the timer stops, pending state
     * writes finish. Leases still held may be released; they change nothing any more.
     */
    close() {
      if (this.#closePromise !== undefined) return this.#closePromise
      this.#closing = true
      for (const [id, pending] of [...this.#pending]) {
        if (this.#pending.get(id) !== pending) continue
        if (!this.#stepQuietly({ type: 'cancel', now: this.#now(), id })) {
          this.#settle(id)?.reject(closed('the roster closed before a lease was granted'))
        }
      }
      clearTimeout(this.#timer)
      this.#timer = undefined
      this.#unwatch?.()
      this.#metrics.close()
      clearTimeout(this.#saveRetry)
      this.#saveRetry = undefined
      this.#closeController.abort(closed())
      this.#closePromise = (async () => {
        await this.idle()
        if (this.#saveQueue.length > 0 && this.#store !== undefined) {
          await this.#track(this.#drainSaves())
        }
        this.#closed = true
        clearTimeout(this.#timer)
        this.#timer = undefined
      })()
      return this.#closePromise
    }

    async [asyncDisposeSymbol]() {
      await this.close()
    }
  }

  const constructing = Symbol('constructing')
  return Roster
}
