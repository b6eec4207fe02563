// A shared roster: one replica of a roster whose inputs are one log on PostgreSQL,
// folded in order by every instance (sql/PROTOCOL.md, followed to the byte). The API is
// the embedded roster's (driver.js); the calls that change state append an entry and
// settle when it is folded, so they return Promises.
//
// Pieces: the appender (one batch in flight, the rest queued for the next), the reader
// (folds entries strictly in seq order, woken by NOTIFY, a poll, and its own appends),
// the dispatch of each output to whoever the protocol says acts on it, heartbeats and
// fencing. The leader's duties are in leader.js.

import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { FAILURE_KINDS, failureFacts } from '../classify.js'
import { Lease, asyncDisposeSymbol, defineQueries, exclusionFrom, isAbortSignal, list } from '../driver.js'
import { RotaError, aborted, closed, exhausted, fenced as fencedError, timedOut } from '../errors.js'
import { Metrics } from '../metrics.js'
import { Appender } from './appender.js'
import { Leader } from './leader.js'
import { PgLogStore } from './pg-log-store.js'

/** Test-only: `roster[CRASH]()` stops the instance as a crash would (no cancel, no step-down, no expiry). */
export const CRASH = Symbol.for('rota.crash')

const LOG_VERSION = 1
const READ_LIMIT = 1_000
const DEFAULT_PROBE_TIMEOUT_MS = 5_000
const monotonic = () => performance.now()

const omitUndefined = (object) => {
  const out = {}
  for (const key in object) if (object[key] !== undefined) out[key] = object[key]
  return out
}

const invalid = (message) => new RotaError('INVALID_INPUT', `Roster.create: shared: ${message}`)

/** The `shared` options, checked, with the protocol's defaults. */
function sharedOptions(shared) {
  if (shared === null || typeof shared !== 'object') throw invalid('must be an object')
  const { connectionString, pool, roster, name, pollMs = 1_000, sweepMs = 250, snapshotEvery = 1_000 } = shared
  if ((connectionString === undefined) === (pool === undefined)) throw invalid('give exactly one of connectionString and pool')
  if (typeof roster !== 'string' || roster === '') throw invalid('roster (the log\'s name) must be a non-empty string')
  if (name !== undefined && (typeof name !== 'string' || name === '' || name.includes('/'))) {
    throw invalid('name must be a non-empty string without "/"')
  }
  const ttlMs = shared.ttlMs ?? 10_000
  const leaderTtlMs = shared.leaderTtlMs ?? ttlMs
  const numbers = { ttlMs, leaderTtlMs, sweepMs, snapshotEvery, pollMs }
  for (const [key, value] of Object.entries(numbers)) {
    if (!Number.isSafeInteger(value) || value <= 0) throw invalid(`${key} must be a positive whole number, not ${value}`)
  }
  return { connectionString, pool, roster, name: name ?? `${hostname()}-${process.pid}`, ...numbers }
}

const incarnation = (name) => `${name}:${randomBytes(4).toString('hex')}`

/** The `type` of an entry (its first field, as every host writes it), cheaply. */
function entryType(entry) {
  const match = /^\{"type":"([A-Za-z]+)"/.exec(entry)
  return match === null ? undefined : match[1]
}

function parseEntry(entry) {
  try {
    return JSON.parse(entry)
  } catch {
    return undefined
  }
}

/**
 * Builds a shared roster (driver.js dispatches `Roster.create({ shared })` here).
 * `context`: { api, resolveDocument, defaultProbe, emitter } from the driver.
 */
export function createSharedRoster(options, context) {
  return SharedRoster.create(options, context)
}

const constructing = Symbol('constructing')

export class SharedRoster {
  static {
    defineQueries(this, (roster) => roster.#policy, (roster) => roster.#emitter)
  }

  /**
   * Checks the options, connects, and starts the replica: the genesis (an empty log)
   * or the latest snapshot, then the log up to its head.
   */
  static async create(options, context) {
    const shared = sharedOptions(options.shared)
    const hasDocument = ['document', 'repoDocument', 'rosterPath', 'repoRosterPath'].some((k) => options[k] !== undefined)
    const resolved = hasDocument ? await context.resolveDocument(options) : undefined
    const coreOptions = { ...options.options, preflight: false, preflightReloads: false }
    if (coreOptions.canProbe === undefined) coreOptions.canProbe = options.probe !== false
    if (resolved !== undefined) {
      // Refused here, before a bad genesis could reach the log.
      new context.api.Policy(resolved.document, coreOptions).free?.()
    }
    // A database that cannot be reached fails the start with the store's error (DATABASE).
    const store = await PgLogStore.connect({
      connectionString: shared.connectionString,
      pool: shared.pool,
      roster: shared.roster,
      pollMs: shared.pollMs,
    })
    const roster = new SharedRoster(constructing, options, shared, store, context)
    try {
      await roster.#start(resolved, coreOptions)
      roster.#secretWarnings()
    } catch (error) {
      await store.forgetInstance(roster.#instance).catch(() => {})
      roster[CRASH]()
      await roster.#closePromise
      throw error
    }
    return roster
  }

  #options
  #shared
  #store
  #api
  #resolveDocument
  #emitter
  #probe
  #probeTimeoutMs
  #machines
  #name
  #instance
  #requestSeq = 0
  #policy = null
  #foldedSeq = 0
  #lastNow = 0
  #wakeAt = null
  #lastTickNow = null
  /** database clock − local clock, from every answer that carries the database's time */
  #offset = 0
  /** request id → { type, role, label, timeoutMs, input, resolve, reject, cleanup, queued, abortReason } */
  #requests = new Map()
  /** seq of an entry of ours → the call waiting for it to be folded */
  #calls = new Map()
  #appender
  #pulling = null
  #pullAgain = false
  /**
   * The reader stopped at our own entry of the batch in flight: what it read after it
   * (another instance's entries, whose notification that read consumed) is read again
   * once the append returns, even when the batch itself folds as sent.
   */
  #stoppedAtOwn = false
  #subscription
  #heartbeatTimer
  #fenceTimer
  #beating = false
  #fence = null
  #expiredByLog = false
  #rejoining = false
  #halted = null
  #closing = false
  #closePromise
  #dead = false
  #closeController = new AbortController()
  #inflight = new Set()
  #leader
  #held = new Map()
  #heldTotal = 0
  #queued = new Map()
  #queuedTotal = 0
  #specs
  #keepAlive
  #keepAliveWaiters = 0
  #metrics

  /** Use `Roster.create({ shared })`. */
  constructor(token, options, shared, store, context) {
    if (token !== constructing) throw new TypeError('use Roster.create({ shared })')
    this.#options = options
    this.#shared = shared
    this.#store = store
    this.#api = context.api
    this.#resolveDocument = context.resolveDocument
    this.#emitter = context.emitter
    this.#probe = options.probe === false ? undefined : (options.probe ?? context.defaultProbe)
    this.#probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS
    this.#machines = options.machines
    this.#name = shared.name
    this.#instance = incarnation(shared.name)
    if (typeof options.onEvent === 'function') this.#emitter.on('event', options.onEvent)
    this.#leader = new Leader(this.#leaderHost(), shared)
    this.#appender = new Appender(this.#appenderHost())
    this.#metrics = new Metrics(options.meter, () => this.#queueByRole())
  }

  /** Connects the replica: genesis or snapshot, catch up, then heartbeats and the leader. */
  async #start(resolved, coreOptions) {
    const store = this.#store
    const local = Date.now()
    this.#offset = (await store.now()) - local
    const sent = monotonic()
    await store.heartbeat(this.#instance)
    this.#beatSucceeded(sent)
    // Beating from here on: catching up with a long log may take longer than the TTL.
    const pace = Math.max(1, Math.floor(this.#shared.ttlMs / 4))
    this.#heartbeatTimer = setInterval(() => this.#heartbeat(), pace)
    this.#heartbeatTimer.unref?.()
    let head = await store.head()
    if (head.lastSeq === 0) {
      if (resolved === undefined) {
        throw new RotaError('INVALID_DOCUMENT', `the shared roster '${this.#shared.roster}' has no log yet: give \`document\` or \`rosterPath\` to start it`)
      }
      const genesis = JSON.stringify({ type: 'genesis', log: LOG_VERSION, document: resolved.document, options: coreOptions })
      // Alone in its batch: when two race, the one at seq 1 counts.
      await store.append([genesis], { instance: this.#instance })
      head = await store.head()
    }
    if (head.compactedThrough > 0) await this.#fromSnapshot()
    await this.#pull()
    if (this.#halted !== null) throw this.#halted
    if (this.#fence !== null) throw fencedError(this.#fence.reason, this.#fence.since)
    if (this.#policy === null) throw new RotaError('INVALID_STATE', `the shared roster '${this.#shared.roster}' has no genesis to fold`)
    if (resolved !== undefined && JSON.stringify(resolved.document) !== JSON.stringify(this.#policy.document())) {
      this.#event('warn', 'sharedDocumentDiffers', `the log's roster document differs from this instance's: folding the log's (reload() changes it for all)`, {
        roster: this.#shared.roster,
      })
    }
    this.#subscription = store.subscribe(() => this.#pull(), {
      pollMs: this.#shared.pollMs,
      onError: (error) => this.#event('debug', 'listenLost', `the LISTEN connection dropped: ${error.message}`, {}),
    })
    this.#leader.start()
  }

  // ---- identity and state ---------------------------------------------------------

  /** This incarnation's id, `<name>:<8 hex>`: the owner of its requests and leases. */
  get instance() {
    return this.#instance
  }

  get isLeader() {
    return !this.#dead && this.#fence === null && this.#leader.isLeader
  }

  /** The leader epoch this instance holds, or null. */
  get leaderEpoch() {
    return this.isLeader ? this.#leader.epoch : null
  }

  get fenced() {
    return this.#fence !== null
  }

  /** Why and since when it is fenced (`{ reason, since }`), or null. */
  get fence() {
    return this.#fence === null ? null : { ...this.#fence }
  }

  /** The seq of the last entry folded. */
  get foldedSeq() {
    return this.#foldedSeq
  }

  /** The replica's state hash (16 hex digits): equal on every replica at the same foldedSeq. */
  stateHash() {
    return this.#policy.stateHash()
  }

  // ---- appends ------------------------------------------------------------------------

  /** Queues an entry for the next batch; `call` settles when it is folded. */
  #append(entry, call) {
    this.#appender.push(typeof entry === 'string' ? entry : JSON.stringify(entry), call)
  }

  #appenderHost() {
    return {
      store: this.#store,
      instance: () => this.#instance,
      epoch: () => (this.#fence === null ? this.#leader.epoch : null),
      retryMs: Math.max(1, Math.floor(this.#shared.ttlMs / 4)),
      appended: (batch, result, sentAt, instance) => {
        this.#clock(result.now, sentAt)
        batch.forEach((item, i) => {
          if (item.call !== undefined) this.#calls.set(result.firstSeq + i, item.call)
        })
        const readAgain = this.#stoppedAtOwn
        this.#stoppedAtOwn = false
        if (this.#pulling === null && this.#foldedSeq + 1 === result.firstSeq && this.#halted === null) {
          // Nothing between the fold and our batch: the log holds these very bytes at
          // these seqs and this `now`, so they fold as read, one round trip sooner.
          for (let i = 0; i < batch.length && !this.#dead && this.#halted === null; i += 1) {
            this.#fold({ seq: result.firstSeq + i, now: result.now, instance, entry: batch[i].text })
          }
          this.#afterFold()
          // Entries after it may have been seen (and their wake spent) by a read that
          // stopped at it: read them now, not at the next poll.
          if (readAgain) this.#pull()
        } else {
          // Read up to it at once (no wait for the notification).
          this.#pull()
        }
      },
      failed: (error, calls) => {
        const reason = `an append to the log failed: ${error?.message ?? error}`
        for (const item of calls) item.call.reject?.(fencedError(reason, Date.now()))
        this.#fenceNow(reason)
      },
      refused: (error) => this.#leader.refused(error),
    }
  }

  /** A database time seen at `sentAt` (local) or later: the clock estimate's offset. */
  #clock(dbNow, sentAt) {
    this.#offset = dbNow - Math.round((sentAt + Date.now()) / 2)
  }

  /** The database clock, estimated. */
  #dbNow() {
    return Date.now() + this.#offset
  }

  // ---- the reader and the fold ------------------------------------------------------

  /** Reads and folds what is new; one read at a time (a wake meanwhile reads again after). */
  #pull() {
    if (this.#dead || this.#halted !== null) return Promise.resolve()
    if (this.#pulling !== null) {
      this.#pullAgain = true
      return this.#pulling
    }
    const run = (async () => {
      try {
        do {
          this.#pullAgain = false
          await this.#readAll()
        } while (this.#pullAgain && !this.#dead)
      } catch (error) {
        // A fold that throws is a bug here: fenced, saying so, rather than folding on wrong.
        this.#fenceNow(`folding the log failed: ${error?.stack ?? error}`)
      }
    })().finally(() => {
      if (this.#pulling !== run) return
      this.#pulling = null
      // A wake between the loop's last check and here is not lost.
      if (this.#pullAgain) this.#pull()
    })
    this.#pulling = run
    return run
  }

  async #readAll() {
    for (;;) {
      if (this.#dead || this.#halted !== null) return
      let entries
      try {
        entries = await this.#store.readFrom(this.#foldedSeq + 1, { limit: READ_LIMIT })
      } catch (error) {
        if (this.#dead) return
        if (error?.code === 'COMPACTED') {
          try {
            await this.#fromSnapshot()
            continue
          } catch (again) {
            error = again
          }
        }
        this.#fenceNow(`the log cannot be read: ${error?.message ?? error}`)
        return
      }
      if (this.#dead) return
      let stopped = false
      for (const entry of entries) {
        // Read again from where the fold is; and our own entry of the batch in flight
        // waits: its calls are known once the append returns (which reads again).
        const appender = this.#appender
        const own = appender.inFlight !== null && entry.instance === this.#instance && entry.seq > appender.sentThrough
        stopped = entry.seq !== this.#foldedSeq + 1 || own
        if (own) this.#stoppedAtOwn = true
        if (stopped) break
        this.#fold(entry)
        if (this.#halted !== null || this.#dead) return
      }
      this.#afterFold()
      if (stopped || entries.length < READ_LIMIT) return
    }
  }

  /** Starts the replica again from the latest snapshot (a read below the compaction point). */
  async #fromSnapshot() {
    const snapshot = await this.#store.latestSnapshot()
    if (snapshot === null) throw new RotaError('INVALID_STATE', 'the log was compacted and has no snapshot')
    if (snapshot.seq <= this.#foldedSeq) return
    const policy = this.#api.Policy.importState(JSON.parse(snapshot.state))
    this.#policy?.free?.()
    this.#policy = policy
    this.#foldedSeq = snapshot.seq
    this.#lastNow = policy.now
    this.#wakeAt = policy.wakeAt ?? null
    this.#specs = undefined
    this.#settleFromSnapshot(snapshot.seq)
  }

  /**
   * Our calls whose entries the snapshot folded (we skipped their outputs): a request
   * granted there gets its lease, one still waiting waits on, any other ended unseen.
   */
  #settleFromSnapshot(seq) {
    for (const [at, call] of this.#calls) {
      if (at > seq) continue
      this.#calls.delete(at)
      if (call.request === undefined) call.resolve([])
    }
    const status = this.#policy.snapshot()
    const waiting = new Set(status.queue.filter((q) => q.owner === this.#instance).map((q) => q.request))
    const granted = new Map()
    for (const executor of status.executors) {
      for (const lease of executor.leases) if (lease.owner === this.#instance) granted.set(lease.request, { ...lease, executor: executor.id })
    }
    for (const [id, pending] of [...this.#requests]) {
      if (waiting.has(id) || this.#appender.unsent(id)) continue
      const lease = granted.get(id)
      if (lease !== undefined) {
        this.#granted({ type: 'granted', request: id, lease: lease.lease, executor: lease.executor, role: lease.role ?? pending.role, hold: lease.hold, passed: 0, occupied: lease.occupied, owner: this.#instance }, { now: lease.since })
      } else if (this.#calls.size === 0 || ![...this.#calls.values()].some((c) => c.request === id)) {
        this.#settle(id)?.reject(new RotaError('UNKNOWN_REQUEST', `request '${id}' ended while this replica restarted from a snapshot (seq ${seq}); its outcome is not known here`))
      }
    }
  }

  #fold({ seq, now, instance, entry }) {
    // Past its TTL with no heartbeat, the log may already have expired this instance
    // further on: nothing it folds now may settle a caller (fence first).
    this.#fenceIfLapsed()
    const mine = instance === this.#instance
    const call = mine ? this.#calls.get(seq) : undefined
    if (call !== undefined) this.#calls.delete(seq)
    if (seq === 1) {
      this.#genesis(entry)
      this.#foldedSeq = 1
      return
    }
    const type = entryType(entry)
    if (type === 'genesis' || this.#policy === null) {
      // A genesis that lost the race to seq 1 (or one met with no replica yet): skipped.
      this.#foldedSeq = seq
      return
    }
    const answer = JSON.parse(this.#policy.handleJson(`{"now":${now},${entry.slice(1)}`))
    this.#foldedSeq = seq
    if (answer.error !== undefined) {
      const { code, message, violations } = answer.error
      const error = new RotaError(code, message, violations === undefined ? {} : { violations })
      if (type === 'version' && code === 'UNSUPPORTED_VERSION') {
        this.#halted = error
        this.#fenceNow(`the log moved to a version this module does not fold (seq ${seq}): ${message}; a newer rota is needed`)
        return
      }
      if (call !== undefined) {
        if (call.request !== undefined) this.#settle(call.request)?.reject(error)
        else call.reject(error)
      } else if (this.#emitter.listenerCount('event') > 0) {
        this.#event('debug', 'inputRejected', `the core rejected entry ${seq} (${type}) of ${instance}: ${message}`, { seq, input: type, code })
      }
      return
    }
    this.#lastNow = now
    this.#wakeAt = answer.wakeAt ?? null
    if (type === 'tick') this.#lastTickNow = now
    if (type === 'reload') this.#specs = undefined
    const expire = type === 'expireOwner' ? parseEntry(entry)?.owner : undefined
    for (const output of answer.outputs) this.#dispatch(output, { seq, now, appender: instance, expire })
    if (call !== undefined && call.request === undefined) call.resolve(answer.outputs)
    if (expire === this.#instance && !mine) {
      this.#expiredByLog = true
      this.#fenceNow(`the log expired this instance (entry ${seq}, appended by ${instance}): its heartbeat lapsed`)
    }
  }

  #genesis(entry) {
    const genesis = parseEntry(entry)
    if (genesis?.type !== 'genesis') {
      this.#halted = new RotaError('INVALID_LOG', `the shared roster's log does not start with a genesis entry`)
    } else if (genesis.log !== LOG_VERSION) {
      this.#halted = new RotaError('UNSUPPORTED_VERSION', `the shared roster's log is version ${genesis.log}; this module folds version ${LOG_VERSION}`)
    } else {
      try {
        this.#policy = new this.#api.Policy(genesis.document, genesis.options)
        this.#lastNow = 0
        this.#wakeAt = this.#policy.wakeAt ?? null
        return
      } catch (error) {
        this.#halted = error
      }
    }
    this.#fenceNow(this.#halted.message)
  }

  #afterFold() {
    if (this.#fence === null) this.#leader.folded()
  }

  // ---- who acts on which output ------------------------------------------------------

  #dispatch(output, at) {
    if (this.#emitter.listenerCount('output') > 0) this.#emitter.emit('output', { ...output, seq: at.seq })
    const me = this.#instance
    switch (output.type) {
      case 'granted':
        return output.owner === me ? this.#granted(output, at) : undefined
      case 'waiting': {
        if (output.owner !== me) return undefined
        const pending = this.#requests.get(output.request)
        if (pending === undefined) return undefined
        pending.report = output.report
        if (!pending.queued) {
          pending.queued = true
          this.#count(this.#queued, pending.role, 1)
          this.#queuedTotal += 1
        }
        return undefined
      }
      case 'exhausted': {
        if (output.owner !== me) return undefined
        const pending = this.#settle(output.request)
        return pending?.reject(exhausted(output, pending.label, pending.input && this.#explainQuietly(pending.input)))
      }
      case 'timedOut': {
        if (output.owner !== me) return undefined
        const pending = this.#settle(output.request)
        return pending?.reject(this.#timeoutError(output.request, pending, output.reasons))
      }
      case 'unavailable':
        return output.owner === me ? this.#settle(output.request)?.resolve(undefined) : undefined
      case 'cancelled': {
        if (output.owner !== me) return undefined
        const pending = this.#settle(output.request)
        return pending?.reject(pending.abortReason ?? closed('the roster closed before a lease was granted'))
      }
      case 'createMachine':
        return (output.owner ?? at.appender) === me ? this.#createMachine(output) : undefined
      case 'deleteMachine': {
        const actor = at.expire !== undefined ? at.appender : (output.owner ?? at.appender)
        return actor === me ? this.#deleteMachine(output) : undefined
      }
      case 'probe':
        return this.#fence === null ? this.#leader.probe(output.executor, output.url) : undefined
      case 'event':
        if (output.name === 'excluded') this.#metrics.excluded(output.fields?.kind)
        if (this.#emitter.listenerCount('event') === 0) return undefined
        return this.#emitter.emit('event', {
          level: output.level,
          name: output.name,
          message: output.message,
          fields: output.fields,
          time: at.now,
          seq: at.seq,
        })
      default:
        // persist: the log is the persistence; preflight: never in log version 1
        return undefined
    }
  }

  #granted(output, at) {
    this.#fenceIfLapsed()
    const pending = this.#settle(output.request)
    const lease = new Lease(output, this.#spec(output.executor), this.#releaseLease, at.now)
    this.#count(this.#held, lease.role, 1)
    this.#heldTotal += 1
    if (pending === undefined || pending.abortReason !== undefined) {
      // Nobody waits for it (given up, fenced, or an earlier life of this instance): back at once.
      lease.release()
      pending?.reject(pending.abortReason)
      return
    }
    if (output.occupied === true) this.#metrics.leaseOccupied()
    else this.#metrics.leaseGranted(at.now - (pending.sentAt ?? at.now))
    pending.resolve(lease)
  }

  #releaseLease = (lease, role) => {
    this.#count(this.#held, role, -1)
    this.#heldTotal -= 1
    if (this.#dead) return
    this.#append(`{"type":"release","lease":${lease}}`)
  }

  #settle(request) {
    const pending = this.#requests.get(request)
    if (pending === undefined) return undefined
    this.#requests.delete(request)
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

  #keepAliveChange(delta) {
    this.#keepAliveWaiters += delta
    if (this.#keepAliveWaiters > 0 && this.#keepAlive === undefined && !this.#dead) {
      this.#keepAlive = setInterval(() => {}, 2 ** 31 - 1)
    } else if (this.#keepAliveWaiters === 0 && this.#keepAlive !== undefined) {
      clearInterval(this.#keepAlive)
      this.#keepAlive = undefined
    }
  }

  #spec(id) {
    if (this.#specs === undefined) {
      this.#specs = new Map()
      for (const spec of this.#policy.document()?.executors ?? []) this.#specs.set(spec.id, spec)
    }
    return this.#specs.get(id) ?? { id }
  }

  #explainQuietly({ role, avoid, prefer, pin }) {
    try {
      return this.#policy.explain(omitUndefined({ role, avoid, prefer, pin }))
    } catch {
      return undefined
    }
  }

  #timeoutError(request, pending, reasons) {
    return timedOut({
      request,
      role: pending.role,
      timeoutMs: pending.timeoutMs,
      label: pending.label,
      reasons,
      report: pending.report,
      explanation: pending.input && this.#explainQuietly(pending.input),
    })
  }

  /**
   * A literal secret in an executor's `env` of the log's document (the core's `check`
   * finds it): a warning event per value, naming its place, never the value. (It is in
   * the database's log too: secrets belong in `${VAR}` references.)
   */
  #secretWarnings() {
    if (this.#emitter.listenerCount('event') === 0 || this.#policy === null) return
    let found
    try {
      found = this.#api.check(this.#policy.document(), this.#options.options?.kinds).warnings
    } catch {
      return
    }
    for (const warning of found ?? []) {
      this.#event('warn', 'literalSecret', `roster: ${warning.message}`, { path: warning.path })
    }
  }

  #event(level, name, message, fields = {}) {
    if (this.#emitter.listenerCount('event') === 0) return
    this.#emitter.emit('event', { level, name, message, fields, time: this.#dbNow(), instance: this.#instance })
  }

  #track(promise) {
    this.#inflight.add(promise)
    const done = () => this.#inflight.delete(promise)
    promise.then(done, done)
    return promise
  }

  // ---- effects: machines and probes ---------------------------------------------------

  #createMachine({ request, executor }) {
    const create = this.#machines?.create
    const pending = this.#requests.get(request)
    this.#track(
      (async () => {
        let hold
        try {
          if (typeof create !== 'function') throw new Error('this roster has no machines.create callback')
          hold = await create({ executor, request, role: pending?.role, spec: this.#spec(executor), signal: this.#closeController.signal })
        } catch (error) {
          this.#append({ type: 'machineFailed', id: request, message: String(error?.message ?? error) })
          return
        }
        this.#append({ type: 'machineCreated', id: request, hold: hold ?? null })
      })(),
    )
  }

  #deleteMachine({ executor, hold, lease }) {
    const remove = this.#machines?.delete
    const answer = (ok, error) => {
      if (lease !== undefined) this.#append(omitUndefined({ type: 'machineDeleted', lease, ok, error }))
    }
    if (typeof remove !== 'function') {
      this.#event('warn', 'machineNotDeleted', `no machines.delete callback: machine of ${executor} left running`, { executor, hold })
      answer(false, 'this roster has no machines.delete callback')
      return
    }
    this.#track(
      (async () => {
        try {
          await remove({ executor, hold, spec: this.#spec(executor) })
        } catch (error) {
          answer(false, String(error?.message ?? error))
          return
        }
        answer(true)
      })(),
    )
  }

  async #runProbe(executor, url) {
    const probe = this.#probe
    if (probe === undefined) return false
    const signal = AbortSignal.any([AbortSignal.timeout(this.#probeTimeoutMs), this.#closeController.signal])
    let timer
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => resolve(false), this.#probeTimeoutMs)
    })
    try {
      return (await Promise.race([probe(url, { signal, executor, timeoutMs: this.#probeTimeoutMs }), timeout])) === true
    } catch (error) {
      this.#event('debug', 'probeFailed', `health probe of ${executor} at ${url} failed: ${error?.message ?? error}`, { executor, url })
      return false
    } finally {
      clearTimeout(timer)
    }
  }

  #leaderHost() {
    return {
      store: this.#store,
      instance: () => this.#instance,
      appendLeader: (text) => this.#appender.pushLeader(text),
      foldedSeq: () => this.#foldedSeq,
      wakeAt: () => this.#wakeAt,
      lastTickNow: () => this.#lastTickNow,
      dbNow: () => this.#dbNow(),
      exportState: () => JSON.stringify(this.#policy.exportState()),
      probesInFlight: () => {
        const runtime = this.#policy.exportState().runtime ?? {}
        return Object.entries(runtime)
          .filter(([, r]) => r.probeInFlight === true)
          .map(([executor]) => ({ executor, url: this.#spec(executor).health }))
          .filter((p) => typeof p.url === 'string')
      },
      runProbe: (executor, url) => {
        this.#metrics.probed()
        return this.#track(this.#runProbe(executor, url))
      },
      pull: () => this.#pull(),
      event: (level, name, message, fields) => this.#event(level, name, message, fields),
    }
  }

  // ---- heartbeats, fencing, rejoining ---------------------------------------------------

  async #heartbeat() {
    if (this.#dead || this.#beating) return
    this.#beating = true
    const sentAt = Date.now()
    const sent = monotonic()
    try {
      if (this.#expiredByLog && this.#fence !== null) {
        // The log ended the old incarnation: a new id (its requests and leases are gone).
        this.#instance = incarnation(this.#name)
        this.#expiredByLog = false
        this.#requestSeq = 0
        this.#appender.forgetSent()
      }
      const seen = await this.#store.heartbeat(this.#instance)
      if (this.#dead) return
      this.#clock(seen, sentAt)
      // A gap of ttlMs since the last good heartbeat was sent (a paused process, a
      // blocked loop): the leader may have expired this instance meanwhile. Fenced
      // until it has read the log past this heartbeat (#rejoin).
      const gap = sent - this.#beatSentAt
      if (gap >= this.#shared.ttlMs) this.#fenceNow(`no heartbeat for ${Math.round(gap)} ms (at least ${this.#shared.ttlMs} ms: paused or cut off)`)
      this.#beatSucceeded(sent)
      if (this.#fence !== null) this.#rejoin()
      else this.#appender.kick()
    } catch (error) {
      if (!this.#dead) this.#event('debug', 'heartbeatFailed', `a heartbeat failed: ${error?.message ?? error}`, {})
    } finally {
      this.#beating = false
    }
  }

  /**
   * A heartbeat sent at `sent` (monotonic) succeeded: the database saw this instance
   * at or after then, so the leader cannot expire it before `sent + ttlMs`. The fence
   * falls due at that time, by the timer or, when a timer runs late (a paused process:
   * SIGSTOP), by `#fenceIfLapsed` before anything is folded or granted.
   */
  #beatSucceeded(sent) {
    this.#beatSentAt = Math.max(this.#beatSentAt, sent)
    clearTimeout(this.#fenceTimer)
    const left = Math.max(0, this.#beatSentAt + this.#shared.ttlMs - monotonic())
    this.#fenceTimer = setTimeout(() => this.#fenceIfLapsed(), left)
    this.#fenceTimer.unref?.()
  }

  #beatSentAt = -Infinity

  /** Fences once `ttlMs` passed since the last heartbeat that succeeded was sent. */
  #fenceIfLapsed() {
    if (this.#fence !== null || monotonic() - this.#beatSentAt < this.#shared.ttlMs) return false
    this.#fenceNow(`no heartbeat succeeded for ${this.#shared.ttlMs} ms`)
    return true
  }

  /** Fences: grants nothing, every pending call rejects FENCED, until it rejoins. */
  #fenceNow(reason) {
    if (this.#dead || this.#fence !== null) return
    const since = Date.now()
    this.#fence = { reason, since }
    this.#leader.stop()
    const error = () => fencedError(reason, since)
    for (const id of [...this.#requests.keys()]) this.#settle(id)?.reject(error())
    for (const call of this.#calls.values()) call.reject?.(error())
    this.#calls.clear()
    // Queued calls are dropped (rejected); a queued release or cancel is still sent.
    for (const item of this.#appender.takeCalls()) item.call.reject?.(error())
    this.#appender.dropLeader(error())
    this.#event('warn', 'fenced', `this instance is fenced: ${reason}`, { reason, since })
  }

  /** Once heartbeats succeed again: catch up with the log, cancel orphans, serve again. */
  async #rejoin() {
    if (this.#rejoining || this.#halted !== null) return
    this.#rejoining = true
    try {
      const head = await this.#store.head()
      await this.#pull()
      if (this.#dead || this.#foldedSeq < head.lastSeq || this.#expiredByLog) return
      const fence = this.#fence
      this.#fence = null
      this.#appender.kick()
      // Our requests the log still has waiting and that no call awaits: cancelled.
      for (const queued of this.#policy.snapshot().queue ?? []) {
        if (queued.owner === this.#instance && !this.#requests.has(queued.request)) {
          this.#append(JSON.stringify({ type: 'cancel', id: queued.request }))
        }
      }
      this.#leader.start()
      this.#event('info', 'rejoined', `this instance rejoined the log at seq ${this.#foldedSeq} as ${this.#instance}`, {
        fencedSince: fence?.since,
        instance: this.#instance,
      })
    } catch (error) {
      this.#event('debug', 'rejoinFailed', `rejoining failed: ${error?.message ?? error}`, {})
    } finally {
      this.#rejoining = false
    }
  }

  #checkOpen() {
    if (this.#closing) throw closed()
    if (this.#fence !== null) throw fencedError(this.#fence.reason, this.#fence.since)
  }

  // ---- calls ----------------------------------------------------------------------------

  /** Waits for a slot. Rejects EXHAUSTED, TIMEOUT (by the log's time), ABORT_ERR, FENCED. */
  lease(role, options = {}) {
    return this.#request('lease', role, options)
  }

  /** A slot now, or `undefined`. */
  tryLease(role, options = {}) {
    return this.#request('tryLease', role, options)
  }

  #nextId() {
    let id
    do id = `${this.#instance}/${++this.#requestSeq}`
    while (this.#requests.has(id))
    return id
  }

  #request(type, role, options) {
    try {
      this.#checkOpen()
      if (options === null || typeof options !== 'object') throw new RotaError('INVALID_INPUT', `${type} options must be an object`)
      const signal = options.signal
      if (signal !== undefined && !isAbortSignal(signal)) {
        throw new RotaError('INVALID_INPUT', `signal must be an AbortSignal, not ${signal === null ? 'null' : typeof signal}`)
      }
      if (signal?.aborted) return Promise.reject(signal.reason === undefined ? aborted(signal.reason) : signal.reason)
      const id = options.id ?? this.#nextId()
      if (this.#requests.has(id)) throw new RotaError('DUPLICATE_REQUEST', `request id '${id}' is already in use by a live request`)
      const entry = { type, id, role }
      const avoid = list(options.avoid, 'avoid')
      if (avoid !== undefined) entry.avoid = avoid
      if (options.prefer !== undefined) entry.prefer = options.prefer
      if (options.pin !== undefined) entry.pin = options.pin
      if (options.rank !== undefined) entry.rank = options.rank
      const eventTime = options.eventTime instanceof Date ? options.eventTime.getTime() : options.eventTime
      if (eventTime !== undefined) entry.eventTime = eventTime
      if (options.label !== undefined) entry.label = options.label
      if (options.timeoutMs !== undefined) {
        const ms = Number(options.timeoutMs)
        if (!Number.isFinite(ms) || ms < 0) {
          throw new RotaError('INVALID_INPUT', `timeoutMs must be a number of milliseconds, not ${options.timeoutMs}`)
        }
        entry.timeoutMs = Math.ceil(ms)
      }
      entry.owner = this.#instance
      return new Promise((resolve, reject) => {
        const pending = { type, role, label: options.label, timeoutMs: options.timeoutMs, input: entry, resolve, reject, sentAt: this.#dbNow() }
        if (signal !== undefined) {
          const onAbort = () => {
            if (this.#requests.get(id) !== pending) return
            const reason = signal.reason
            pending.abortReason = reason === undefined ? aborted(reason) : reason
            this.#append({ type: 'cancel', id })
          }
          signal.addEventListener('abort', onAbort, { once: true })
          pending.cleanup = () => signal.removeEventListener('abort', onAbort)
        }
        this.#requests.set(id, pending)
        if (options.timeoutMs !== undefined || signal !== undefined) {
          pending.keepsAlive = true
          this.#keepAliveChange(1)
        }
        this.#append(JSON.stringify(entry), { request: id })
      })
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Records work already running on an executor: it takes a slot even beyond capacity. Resolves with its lease. */
  occupy(executor, options = {}) {
    try {
      this.#checkOpen()
      if (options === null || typeof options !== 'object') throw new RotaError('INVALID_INPUT', 'occupy options must be an object')
      const id = options.id ?? this.#nextId()
      if (this.#requests.has(id)) throw new RotaError('DUPLICATE_REQUEST', `request id '${id}' is already in use by a live request`)
      const entry = omitUndefined({ type: 'occupy', id, executor, role: options.role, hold: options.hold, owner: this.#instance })
      return new Promise((resolve, reject) => {
        this.#requests.set(id, { type: 'occupy', role: options.role, resolve, reject })
        this.#append(JSON.stringify(entry), { request: id })
      })
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Leases, runs `fn(lease)`, reports what it throws (then rethrows it) and releases. */
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
          await this.report(lease.executorId, error)
        } catch {
          // A report refused (or fenced) must not hide the caller's own error.
        }
      }
      throw error
    } finally {
      lease.release()
    }
  }

  /** An entry whose call settles when it is folded: with `answer(outputs)`, or the core's refusal. */
  #call(entry, answer = () => undefined) {
    try {
      this.#checkOpen()
    } catch (error) {
      return Promise.reject(error)
    }
    return new Promise((resolve, reject) => {
      let settled = false
      const call = {
        resolve: (outputs) => {
          if (settled) return
          settled = true
          resolve(answer(outputs))
        },
        reject: (error) => {
          if (settled) return
          settled = true
          reject(error)
        },
      }
      this.#append(JSON.stringify(entry), call)
    })
  }

  /** Reports a failed call on an executor; resolves with the exclusion it put in force, if any. */
  report(executor, error) {
    if (error !== null && typeof error === 'object' && !(error instanceof Error) && 'kind' in error && !FAILURE_KINDS.includes(error.kind)) {
      return Promise.reject(new RotaError('INVALID_INPUT', `unknown failure kind ${JSON.stringify(error.kind)}: one of ${FAILURE_KINDS.join(', ')}`))
    }
    const failure = failureFacts(error, { now: this.#dbNow() })
    return this.#call({ type: 'report', executor, failure }, (outputs) => exclusionFrom(outputs, executor))
  }

  /** The kind the core gives `error` with this roster's signals, reporting nothing. */
  classify(error) {
    if (this.#closing) throw closed()
    return this.#policy.classify(failureFacts(error, { now: this.#dbNow() }))
  }

  /** Takes an executor out of the round for every instance: `exclude(id, { kind, reason, until })`. */
  exclude(executor, options = {}) {
    const spec = typeof executor === 'object' && executor !== null ? executor : { ...options, id: executor }
    const until = spec.until instanceof Date ? spec.until.getTime() : spec.until
    return this.#call(omitUndefined({ type: 'exclude', executor: spec.id, kind: spec.kind, reason: spec.reason, until }))
  }

  /** Ends an executor's exclusion, whatever its kind, for every instance. */
  resume(executor) {
    return this.#call({ type: 'resume', executor })
  }

  /** Replaces the roster for every instance (the document, or `rosterPath` read again). */
  async reload(document) {
    this.#checkOpen()
    const base = this.#options
    const { document: next } =
      document === undefined
        ? await this.#resolveDocument(base)
        : await this.#resolveDocument({ ...base, document, repoDocument: undefined, rosterPath: undefined, repoRosterPath: undefined })
    await this.#call({ type: 'reload', document: next })
  }

  // ---- queries: the replica as folded (`defineQueries` adds the policy's) ------------

  get closed() {
    return this.#closing
  }

  /** This instance's requests waiting in the queue. */
  get waiting() {
    return this.#queuedTotal
  }

  /** Leases this instance holds. */
  get leased() {
    return this.#heldTotal
  }

  counts(role) {
    return { waiting: this.#queued.get(role) ?? 0, leased: this.#held.get(role) ?? 0 }
  }

  /** This instance's requests waiting, by role of the running document (the queue gauge). */
  #queueByRole() {
    const roles = this.#dead ? [...this.#queued.keys()] : this.#policy.snapshot().roles
    return new Map(roles.map((role) => [role, this.#queued.get(role) ?? 0]))
  }

  /**
   * This instance's metrics as Prometheus text (as the embedded roster's): its own
   * grants and their wait, the exclusions it folded, the probes it ran as leader.
   */
  metrics() {
    return this.#metrics.prometheus()
  }

  // ---- lifecycle -------------------------------------------------------------------------

  /** Resolves when no probe or machine callback is in flight. */
  async idle() {
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight])
  }


  /**
   * Leaves the roster: cancels its waiting requests, steps down if leader, appends
   * the expiry of itself (its leases are released), forgets its heartbeat, and ends its
   * connections. Waiting calls reject CLOSED.
   */
  close() {
    if (this.#closePromise !== undefined) return this.#closePromise
    this.#closing = true
    this.#closePromise = (async () => {
      if (!this.#dead) {
        if (this.#fence === null) {
          for (const id of this.#requests.keys()) this.#append({ type: 'cancel', id })
          await this.#appender.drain()
          await this.#leader.stepDown()
          this.#append({ type: 'expireOwner', owner: this.#instance })
          await this.#appender.drain()
          await this.#pull()
        } else {
          // Fenced: its leases go if the log can still take its expiry (harmless twice).
          await this.#store.append([JSON.stringify({ type: 'expireOwner', owner: this.#instance })], { instance: this.#instance }).catch(() => {})
        }
        this.#leader.stop()
        await this.#store.forgetInstance(this.#instance).catch(() => {})
      }
      for (const id of [...this.#requests.keys()]) this.#settle(id)?.reject(closed('the roster closed before a lease was granted'))
      this.#closeController.abort(closed())
      this.#stop()
      this.#metrics.close()
      await this.idle()
      await this.#store.close().catch(() => {})
    })()
    return this.#closePromise
  }

  #stop() {
    this.#dead = true
    this.#leader.stop()
    this.#subscription?.close()
    clearInterval(this.#heartbeatTimer)
    clearTimeout(this.#fenceTimer)
    this.#appender.stop()
    clearInterval(this.#keepAlive)
    this.#keepAlive = undefined
  }

  async [asyncDisposeSymbol]() {
    await this.close()
  }

  /**
   * Test-only: stops as a crash would, with no cleanup: no cancel, no step-down, no
   * expiry, no forgetting its heartbeat (the leader expires it after ttlMs). Its
   * waiting calls reject CLOSED so a test does not hang on them; a pool of its own ends.
   */
  [CRASH]() {
    if (this.#dead) return
    this.#closing = true
    this.#stop()
    this.#closeController.abort(closed('crashed'))
    for (const id of [...this.#requests.keys()]) this.#settle(id)?.reject(closed('the roster crashed (test hook)'))
    for (const call of this.#calls.values()) call.reject?.(closed('the roster crashed (test hook)'))
    this.#calls.clear()
    this.#closePromise = this.#store.close().catch(() => {})
  }
}
