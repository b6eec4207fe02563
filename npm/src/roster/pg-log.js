// The log on PostgreSQL: a roster's membership of a log several processes share
// (sql/PROTOCOL.md, followed to the byte). Every instance folds the whole log, in
// order, into its own copy of the core; this module reads it (woken by NOTIFY, a poll
// and its own appends), appends (appender.js: one batch in flight), beats, fences and
// rejoins, and leads when it holds the leader lease (leader.js). The roster (Roster.js)
// dispatches each folded answer.

import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { RotaError, closed, fenced as fencedError } from '../errors.js'
import { Appender } from '../shared/appender.js'
import { Leader } from '../shared/leader.js'
import { PgLogStore } from '../shared/pg-log-store.js'

const READ_LIMIT = 1_000
const monotonic = () => performance.now()
const invalid = (message) => new RotaError('INVALID_INPUT', `Roster.create: shared: ${message}`)
const incarnation = (name) => `${name}:${randomBytes(4).toString('hex')}`

/** The `shared` options, checked, with the protocol's defaults. */
function sharedOptions(shared) {
  if (shared === null || typeof shared !== 'object') throw invalid('must be an object')
  const { connectionString, pool, roster, name, pollMs = 1_000, sweepMs = 250, snapshotEvery = 1_000 } = shared
  if ((connectionString === undefined) === (pool === undefined)) throw invalid('give exactly one of connectionString and pool')
  if (typeof roster !== 'string' || roster === '') throw invalid("roster (the log's name) must be a non-empty string")
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

/** A rule of the shared log, the core's (`Policy.logJson`: rota_core::log::answer): its answer, or its error thrown. */
function logRule(api, request) {
  const { ok, error } = JSON.parse(api.Policy.logJson(JSON.stringify(request)))
  if (error !== undefined) throw new RotaError(error.code, error.message, error.violations === undefined ? {} : { violations: error.violations })
  return ok
}

export class PgLog {
  dead = false
  #shared
  /** The log's PgLogStore; the roster's side (Roster.js `#side`). */
  store
  #api
  roster
  /** This incarnation's id, `<name>:<8 hex>`: the owner of its requests and leases. */
  instance
  /** The seq of the entry folded last. */
  foldedSeq = 0
  /** The log time of the tick folded last (the leader's tick timer). */
  lastTickNow = null
  /** database clock − local clock, from every answer that carries the database's time */
  #offset = 0
  /** seq of an entry of ours → the call waiting for it to be folded ({ request } or { resolve, reject }) */
  #calls = new Map()
  #appender
  #leader
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
  #beatSentAt = -Infinity
  #fence = null
  #expiredByLog = false
  #rejoining = false
  #halted = null

  /**
   * Checks the options, connects, and starts the replica: the genesis (an empty log)
   * or the latest snapshot, then the log up to its head. `attach(log)` gives the
   * roster's side (Roster.js `#side`).
   */
  static async open(options, resolved, coreOptions, api, attach) {
    const shared = sharedOptions(options)
    // Refused here (no policy can be built from it), before a bad genesis could reach the log.
    const genesis = resolved === undefined ? undefined : logRule(api, { op: 'genesis', document: resolved.document, options: coreOptions })
    // A database that cannot be reached fails the start with the store's error (DATABASE).
    const store = await PgLogStore.connect({ connectionString: shared.connectionString, pool: shared.pool, roster: shared.roster, pollMs: shared.pollMs })
    const log = new PgLog(shared, store, api)
    log.roster = attach(log)
    try {
      await log.#start(genesis)
    } catch (error) {
      await store.forgetInstance(log.instance).catch(() => {})
      await log.crash(() => {})
      throw error
    }
    return log
  }

  constructor(shared, store, api) {
    this.#shared = shared
    this.store = store
    this.#api = api
    this.instance = incarnation(shared.name)
    this.#leader = new Leader(this, shared)
    this.#appender = new Appender(this, Math.max(1, Math.floor(shared.ttlMs / 4)))
  }

  async #start(genesis) {
    const store = this.store
    const local = Date.now()
    this.#offset = (await store.now()) - local
    const sent = monotonic()
    await store.heartbeat(this.instance)
    this.#beatSucceeded(sent)
    // Beating from here on: catching up with a long log may take longer than the TTL.
    this.#heartbeatTimer = setInterval(() => this.#heartbeat(), Math.max(1, Math.floor(this.#shared.ttlMs / 4)))
    this.#heartbeatTimer.unref?.()
    let head = await store.head()
    if (head.lastSeq === 0) {
      if (genesis === undefined) {
        throw new RotaError('INVALID_DOCUMENT', `the shared roster '${this.#shared.roster}' has no log yet: give \`document\` or \`rosterPath\` to start it`)
      }
      // Alone in its batch: when two race, the one at seq 1 counts.
      await store.append([genesis], { instance: this.instance })
      head = await store.head()
    }
    if (head.compactedThrough > 0) await this.#fromSnapshot()
    await this.pull()
    if (this.#halted !== null) throw this.#halted
    if (this.#fence !== null) throw fencedError(this.#fence.reason, this.#fence.since)
    const policy = this.roster.policy()
    if (policy === null) throw new RotaError('INVALID_STATE', `the shared roster '${this.#shared.roster}' has no genesis to fold`)
    if (genesis !== undefined && JSON.stringify(JSON.parse(genesis).document) !== JSON.stringify(policy.document())) {
      this.roster.event('warn', 'sharedDocumentDiffers', `the log's roster document differs from this instance's: folding the log's (reload() changes it for all)`, {
        roster: this.#shared.roster,
      })
    }
    this.#subscription = store.subscribe(() => this.pull(), {
      pollMs: this.#shared.pollMs,
      onError: (error) => this.roster.event('debug', 'listenLost', `the LISTEN connection dropped: ${error.message}`, {}),
    })
    this.#leader.start()
  }

  // ---- what the roster reads ---------------------------------------------------------

  get isLeader() {
    return !this.dead && this.#fence === null && this.#leader.isLeader
  }

  get leaderEpoch() {
    return this.isLeader ? this.#leader.epoch : null
  }

  get fenced() {
    return this.#fence !== null
  }

  get fence() {
    return this.#fence === null ? null : { ...this.#fence }
  }

  /** The database clock, estimated. */
  now() {
    return Date.now() + this.#offset
  }

  checkOpen() {
    if (this.#fence !== null) throw fencedError(this.#fence.reason, this.#fence.since)
  }

  /** Queues an entry (an input without `now`, or its JSON) for the next batch; `call` settles when it is folded. */
  append(entry, call) {
    this.#appender.push(typeof entry === 'string' ? entry : JSON.stringify(entry), call)
  }

  /** A leader-only entry (with the epoch); resolves with its seq (appender.js `pushLeader`). */
  appendLeader(text) {
    return this.#appender.pushLeader(text).catch((error) => {
      this.#leader.refused(error)
      throw error
    })
  }

  /** A `probe` output: the leader's (it appends the result with its epoch). */
  probe(executor, url) {
    if (this.#fence === null) this.#leader.probe(executor, url)
  }

  stop() {}

  // ---- appends -------------------------------------------------------------------------

  /** A batch of ours appended (appender.js): its calls wait for their seqs; it is folded at once when nothing came between. */
  appended(batch, result, sentAt, instance) {
    this.#clock(result.now, sentAt)
    batch.forEach((item, i) => {
      if (item.call !== undefined) this.#calls.set(result.firstSeq + i, item.call)
    })
    const readAgain = this.#stoppedAtOwn
    this.#stoppedAtOwn = false
    if (this.#pulling === null && this.foldedSeq + 1 === result.firstSeq && this.#halted === null) {
      // Nothing between the fold and our batch: the log holds these very bytes at
      // these seqs and this `now`, so they fold as read, one round trip sooner.
      for (let i = 0; i < batch.length && !this.dead && this.#halted === null; i += 1) {
        this.#fold({ seq: result.firstSeq + i, now: result.now, instance, entry: batch[i].text })
      }
      if (this.#fence === null) this.#leader.folded()
      // Entries after it may have been seen (and their wake spent) by a read that
      // stopped at it: read them now, not at the next poll.
      if (readAgain) this.pull()
    } else {
      // Read up to it at once (no wait for the notification).
      this.pull()
    }
  }

  /** A plain batch's append failed (whether it landed is unknown): its calls reject, the instance fences. */
  appendFailed(error, calls) {
    const reason = `an append to the log failed: ${error?.message ?? error}`
    for (const item of calls) this.#reject(item.call, fencedError(reason, Date.now()))
    this.#fenceNow(reason)
  }

  /** A call's refusal: a request's pending entry, or the call itself. */
  #reject(call, error) {
    if (call.request !== undefined) this.roster.settle(call.request)?.reject(error)
    else call.reject(error)
  }

  /** A database time seen at `sentAt` (local) or later: the clock estimate's offset. */
  #clock(dbNow, sentAt) {
    this.#offset = dbNow - Math.round((sentAt + Date.now()) / 2)
  }

  // ---- the reader and the fold ------------------------------------------------------

  /** Reads and folds what is new; one read at a time (a wake meanwhile reads again after). */
  pull() {
    if (this.dead || this.#halted !== null) return Promise.resolve()
    if (this.#pulling !== null) {
      this.#pullAgain = true
      return this.#pulling
    }
    const run = (async () => {
      try {
        do {
          this.#pullAgain = false
          await this.#readAll()
        } while (this.#pullAgain && !this.dead)
      } catch (error) {
        // A fold that throws is a bug here: fenced, saying so, rather than folding on wrong.
        this.#fenceNow(`folding the log failed: ${error?.stack ?? error}`)
      }
    })().finally(() => {
      if (this.#pulling !== run) return
      this.#pulling = null
      // A wake between the loop's last check and here is not lost.
      if (this.#pullAgain) this.pull()
    })
    this.#pulling = run
    return run
  }

  async #readAll() {
    for (;;) {
      if (this.dead || this.#halted !== null) return
      let entries
      try {
        entries = await this.store.readFrom(this.foldedSeq + 1, { limit: READ_LIMIT })
      } catch (error) {
        if (this.dead) return
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
      if (this.dead) return
      let stopped = false
      for (const entry of entries) {
        // Read again from where the fold is; and our own entry of the batch in flight
        // waits: its calls are known once the append returns (which reads again).
        const appender = this.#appender
        const own = appender.inFlight !== null && entry.instance === this.instance && entry.seq > appender.sentThrough
        stopped = entry.seq !== this.foldedSeq + 1 || own
        if (own) this.#stoppedAtOwn = true
        if (stopped) break
        this.#fold(entry)
        if (this.#halted !== null || this.dead) return
      }
      if (this.#fence === null) this.#leader.folded()
      if (stopped || entries.length < READ_LIMIT) return
    }
  }

  /** Starts the replica again from the latest snapshot (a read below the compaction point). */
  async #fromSnapshot() {
    const snapshot = await this.store.latestSnapshot()
    if (snapshot === null) throw new RotaError('INVALID_STATE', 'the log was compacted and has no snapshot')
    if (snapshot.seq <= this.foldedSeq) return
    this.roster.adopt(this.#api.Policy.importState(JSON.parse(snapshot.state)))
    this.foldedSeq = snapshot.seq
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
    const status = this.roster.policy().snapshot()
    const waiting = new Set(status.queue.filter((q) => q.owner === this.instance).map((q) => q.request))
    const granted = new Map()
    for (const executor of status.executors) {
      for (const lease of executor.leases) if (lease.owner === this.instance) granted.set(lease.request, { ...lease, executor: executor.id })
    }
    for (const [id, pending] of [...this.roster.requests]) {
      if (waiting.has(id) || this.#appender.unsent(id)) continue
      const lease = granted.get(id)
      if (lease !== undefined) {
        const output = { type: 'granted', request: id, lease: lease.lease, executor: lease.executor, role: lease.role ?? pending.role, hold: lease.hold, passed: 0, occupied: lease.occupied, owner: this.instance }
        this.roster.granted(output, lease.since)
      } else if (![...this.#calls.values()].some((c) => c.request === id)) {
        this.roster.settle(id)?.reject(new RotaError('UNKNOWN_REQUEST', `request '${id}' ended while this replica restarted from a snapshot (seq ${seq}); its outcome is not known here`))
      }
    }
  }

  #fold({ seq, now, instance, entry }) {
    // Past its TTL with no heartbeat, the log may already have expired this instance
    // further on: nothing it folds now may settle a caller (fence first).
    this.#fenceIfLapsed()
    const mine = instance === this.instance
    const call = mine ? this.#calls.get(seq) : undefined
    if (call !== undefined) this.#calls.delete(seq)
    this.foldedSeq = seq
    if (seq === 1) return this.#genesis(entry)
    const facts = logRule(this.#api, { op: 'facts', entry, appender: instance, me: this.instance, code: 'UNSUPPORTED_VERSION' })
    const policy = this.roster.policy()
    // A genesis that lost the race to seq 1 (or one met with no replica yet): skipped.
    if (facts.skipped || policy === null) return
    const answer = JSON.parse(policy.handleJson(logRule(this.#api, { op: 'feed', now, entry })))
    if (answer.error !== undefined) {
      const { code, message, violations } = answer.error
      const error = new RotaError(code, message, violations === undefined ? {} : { violations })
      if (facts.halt && code === 'UNSUPPORTED_VERSION') {
        this.#halted = error
        this.#fenceNow(`the log moved to a version this module does not fold (seq ${seq}): ${message}; a newer rota is needed`)
      } else if (call !== undefined) {
        this.#reject(call, error)
      } else if (this.roster.listening()) {
        this.roster.event('debug', 'inputRejected', `the core rejected entry ${seq} (${facts.type}) of ${instance}: ${message}`, { seq, input: facts.type, code })
      }
      return
    }
    if (facts.type === 'tick') this.lastTickNow = now
    const actors = logRule(this.#api, { op: 'actors', entry, appender: instance, outputs: answer.outputs })
    this.roster.fold(answer, now, { seq, appender: instance, actors }, facts.type)
    if (call !== undefined && call.request === undefined) call.resolve(answer.outputs)
    if (facts.expires) {
      this.#expiredByLog = true
      this.#fenceNow(`the log expired this instance (entry ${seq}, appended by ${instance}): its heartbeat lapsed`)
    }
  }

  /** Seq 1: the replica is built from the genesis (the core's `readGenesis`), or the log is refused. */
  #genesis(entry) {
    try {
      const { document, options } = logRule(this.#api, { op: 'readGenesis', entry })
      this.roster.adopt(new this.#api.Policy(document, options))
    } catch (error) {
      this.#halted = error
      this.#fenceNow(error.message)
    }
  }

  // ---- heartbeats, fencing, rejoining ---------------------------------------------------

  async #heartbeat() {
    if (this.dead || this.#beating) return
    this.#beating = true
    const sentAt = Date.now()
    const sent = monotonic()
    try {
      if (this.#expiredByLog && this.#fence !== null) {
        // The log ended the old incarnation: a new id (its requests and leases are gone).
        this.instance = incarnation(this.#shared.name)
        this.roster.instance(this.instance)
        this.#expiredByLog = false
        this.#appender.sentThrough = 0
      }
      const seen = await this.store.heartbeat(this.instance)
      if (this.dead) return
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
      if (!this.dead) this.roster.event('debug', 'heartbeatFailed', `a heartbeat failed: ${error?.message ?? error}`, {})
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

  /**
   * Whether this instance is fenced, fencing first if its heartbeat lapsed. Asked again
   * as a grant reaches its caller: a pause (SIGSTOP) that falls between the fold's check
   * and the handover must not hand out a lease the log may already have expired.
   */
  lapsed() {
    this.#fenceIfLapsed()
    return this.#fence !== null
  }

  /** Fences once `ttlMs` passed since the last heartbeat that succeeded was sent. */
  #fenceIfLapsed() {
    if (this.#fence !== null || monotonic() - this.#beatSentAt < this.#shared.ttlMs) return
    this.#fenceNow(`no heartbeat succeeded for ${this.#shared.ttlMs} ms`)
  }

  /** Fences: grants nothing, every pending call rejects FENCED, until it rejoins. */
  #fenceNow(reason) {
    if (this.dead || this.#fence !== null) return
    const since = Date.now()
    this.#fence = { reason, since }
    this.#leader.stop()
    const error = () => fencedError(reason, since)
    this.roster.rejectAll(error)
    for (const call of this.#calls.values()) call.reject?.(error())
    this.#calls.clear()
    // Queued calls are dropped (rejected); a queued release or cancel is still sent.
    this.#appender.dropCalls(error)
    this.roster.event('warn', 'fenced', `this instance is fenced: ${reason}`, { reason, since })
  }

  /** Once heartbeats succeed again: catch up with the log, cancel orphans, serve again. */
  async #rejoin() {
    if (this.#rejoining || this.#halted !== null) return
    this.#rejoining = true
    try {
      const head = await this.store.head()
      await this.pull()
      if (this.dead || this.foldedSeq < head.lastSeq || this.#expiredByLog) return
      const fence = this.#fence
      this.#fence = null
      this.#appender.kick()
      // Our requests the log still has waiting and that no call awaits: cancelled.
      for (const queued of this.roster.policy().snapshot().queue ?? []) {
        if (queued.owner === this.instance && !this.roster.requests.has(queued.request)) {
          this.append({ type: 'cancel', id: queued.request })
        }
      }
      this.#leader.start()
      this.roster.event('info', 'rejoined', `this instance rejoined the log at seq ${this.foldedSeq} as ${this.instance}`, {
        fencedSince: fence?.since,
        instance: this.instance,
      })
    } catch (error) {
      this.roster.event('debug', 'rejoinFailed', `rejoining failed: ${error?.message ?? error}`, {})
    } finally {
      this.#rejoining = false
    }
  }

  // ---- leaving ---------------------------------------------------------------------------

  /**
   * Leaves the log (close): cancels its waiting requests, steps down if leader, appends
   * the expiry of itself (its leases are released), forgets its heartbeat.
   */
  async leave() {
    if (this.dead) return
    if (this.#fence === null) {
      for (const [id] of this.roster.requests) this.append({ type: 'cancel', id })
      await this.#appender.drain()
      await this.#leader.stepDown()
      this.append({ type: 'expireOwner', owner: this.instance })
      await this.#appender.drain()
      await this.pull()
    } else {
      // Fenced: its leases go if the log can still take its expiry (harmless twice).
      await this.store.append([JSON.stringify({ type: 'expireOwner', owner: this.instance })], { instance: this.instance }).catch(() => {})
    }
    this.#leader.stop()
    await this.store.forgetInstance(this.instance).catch(() => {})
    this.#halt()
  }

  /** Ends its connections (after `leave`). */
  async end() {
    this.#halt()
    await this.store.close().catch(() => {})
  }

  #halt() {
    this.dead = true
    this.#leader.stop()
    this.#subscription?.close()
    clearInterval(this.#heartbeatTimer)
    clearTimeout(this.#fenceTimer)
    this.#appender.stop()
  }

  /**
   * Test-only: stops as a crash would, with no cleanup: no cancel, no step-down, no
   * expiry, no forgetting its heartbeat (the leader expires it after ttlMs).
   * `settle()` rejects the roster's waiting calls.
   */
  crash(settle) {
    this.#halt()
    settle()
    for (const call of this.#calls.values()) call.reject?.(closed('the roster crashed (test hook)'))
    this.#calls.clear()
    return this.store.close().catch(() => {})
  }
}
