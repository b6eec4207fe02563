// The leader's duties in a shared roster (sql/PROTOCOL.md, "Leader"): one instance at a
// time holds the leader lease (a database-time row with an epoch) and appends, with
// that epoch, what no single caller owns: ticks at the replica's `wakeAt`, health
// probes' results, and the expiry of instances whose heartbeat lapsed. It also writes
// snapshots and compacts the log. Every append here carries the epoch, so a deposed
// leader's appends are refused by the database (STALE_EPOCH), never folded.

const monotonic = () => performance.now()

/**
 * The duties of one instance; they run only while it holds the lease by its own clock
 * (renewed less than `leaderTtlMs` ago) and the roster is not fenced. `log`: the
 * instance's PgLog (pg-log.js).
 */
export class Leader {
  #log
  /** The `shared` options: ttlMs, leaderTtlMs, sweepMs, snapshotEvery. */
  #options
  #epoch = null
  #renewedAt = 0
  #running = false
  #leaseTimer
  #sweepTimer
  #tickTimer
  #leasing = false
  #sweeping = false
  #snapshotting = false
  /** The seq of the tick appended and not yet folded (one at a time; Infinity while its append is in flight). */
  #tickSeq = null
  #lastSnapshotSeq = 0
  #expiring = new Set()

  constructor(log, options) {
    this.#log = log
    this.#options = options
  }

  /** The epoch it leads at, or null. A lease that may have lapsed by this clock ends here. */
  get epoch() {
    if (this.#epoch !== null && monotonic() - this.#renewedAt >= this.#options.leaderTtlMs) {
      this.#lose('its lease may have lapsed (not renewed within leaderTtlMs)')
    }
    return this.#epoch
  }

  get isLeader() {
    return this.epoch !== null
  }

  /** Starts trying for the lease every leaderTtlMs / 3 (at once, then on the timer). */
  start() {
    if (this.#running) return
    this.#running = true
    const pace = Math.max(1, Math.floor(this.#options.leaderTtlMs / 3))
    this.#leaseTimer = setInterval(() => this.#leaseRound(), pace)
    this.#leaseTimer.unref?.()
    this.#sweepTimer = setInterval(() => this.#sweep(), this.#options.sweepMs)
    this.#sweepTimer.unref?.()
    this.#leaseRound()
  }

  /** Stops every duty and forgets the lease here (it lapses in the database). */
  stop() {
    this.#running = false
    clearInterval(this.#leaseTimer)
    clearInterval(this.#sweepTimer)
    clearTimeout(this.#tickTimer)
    this.#leaseTimer = this.#sweepTimer = this.#tickTimer = undefined
    if (this.#epoch !== null) this.#lose('stopped')
  }

  /** Ends the lease now when it holds it (close); a lease already lost is no error. */
  async stepDown() {
    const epoch = this.#epoch
    this.stop()
    if (epoch === null) return
    // (A step-down that fails: the lease lapses on its own.)
    await this.#log.store.stepDown(this.#log.instance, epoch).catch(() => {})
  }

  /** A leader-only append was refused: the lease is another's. */
  refused(error) {
    if (error?.code === 'STALE_EPOCH' && this.#epoch !== null) this.#lose(error.message)
  }

  #lose(why) {
    const epoch = this.#epoch
    this.#epoch = null
    this.#tickSeq = null
    clearTimeout(this.#tickTimer)
    this.#tickTimer = undefined
    this.#log.roster.event('info', 'leaderLost', `no longer the leader at epoch ${epoch}: ${why}`, { epoch })
  }

  async #leaseRound() {
    if (!this.#running || this.#leasing) return
    this.#leasing = true
    const store = this.#log.store
    const instance = this.#log.instance
    const askedAt = monotonic()
    try {
      if (this.epoch === null) {
        const lease = await store.acquireLeader(instance, this.#options.leaderTtlMs)
        if (this.#running && lease.acquired && instance === this.#log.instance) {
          this.#epoch = lease.epoch
          this.#renewedAt = askedAt
          await this.#became()
        }
      } else {
        const epoch = this.#epoch
        await store.renewLeader(instance, epoch, this.#options.leaderTtlMs)
        if (this.#epoch === epoch) this.#renewedAt = askedAt
      }
    } catch (error) {
      this.refused(error)
    } finally {
      this.#leasing = false
    }
  }

  async #became() {
    const epoch = this.#epoch
    this.#log.roster.event('info', 'leader', `this instance leads the roster at epoch ${epoch}`, { epoch })
    try {
      this.#lastSnapshotSeq = (await this.#log.store.latestSnapshot())?.seq ?? 0
    } catch {
      this.#lastSnapshotSeq = 0
    }
    // A probe the old leader started and never answered would stay in flight for good:
    // run again once caught up (its result may be in the log already).
    await this.#log.pull()
    if (this.#epoch !== epoch) return
    for (const { executor, url } of this.#log.roster.policy().probesInFlight()) this.probe(executor, url)
    this.folded()
  }

  /** After the replica folded entries: ticks, snapshots. */
  folded() {
    if (!this.isLeader) return
    const seq = this.#log.foldedSeq
    if (this.#tickSeq !== null && seq >= this.#tickSeq) this.#tickSeq = null
    this.#armTick()
    if (!this.#snapshotting && seq - this.#lastSnapshotSeq >= this.#options.snapshotEvery) this.#snapshot()
  }

  // ---- ticks ---------------------------------------------------------------------

  #armTick() {
    clearTimeout(this.#tickTimer)
    this.#tickTimer = undefined
    const wakeAt = this.#log.roster.wakeAt()
    if (wakeAt === null || wakeAt === undefined || this.#tickSeq !== null) return
    let delay = wakeAt - this.#log.now()
    // A tick stamped before `wakeAt` (this clock's estimate ran ahead): wait for the rest.
    const last = this.#log.lastTickNow
    if (last !== null && last < wakeAt) delay = Math.max(delay, Math.min(wakeAt - last, 50), 1)
    this.#tickTimer = setTimeout(() => this.#tick(), Math.min(Math.max(0, delay), 2 ** 31 - 1))
    this.#tickTimer.unref?.()
  }

  async #tick() {
    this.#tickTimer = undefined
    if (!this.isLeader || this.#tickSeq !== null) return
    this.#tickSeq = Infinity
    // (Refused or lost: null, and the next leader ticks.)
    this.#tickSeq = await this.#log.appendLeader('{"type":"tick"}').catch(() => null)
    if (this.#tickSeq !== null && this.#log.foldedSeq >= this.#tickSeq) this.folded()
  }

  // ---- sweeps --------------------------------------------------------------------

  async #sweep() {
    if (!this.isLeader || this.#sweeping) return
    this.#sweeping = true
    try {
      const me = this.#log.instance
      const gone = await this.#log.store.expiredInstances(this.#options.ttlMs)
      for (const { instance } of gone) {
        if (instance === me || this.#expiring.has(instance) || !this.isLeader) continue
        this.#expiring.add(instance)
        this.#expire(instance).finally(() => this.#expiring.delete(instance))
      }
    } catch {
      // the database is away: the heartbeats will tell
    } finally {
      this.#sweeping = false
    }
  }

  /**
   * Expires one instance, atomically with its heartbeat (rota_expire_instance): a
   * heartbeat that landed since the sweep listed it refuses the expiry.
   */
  async #expire(instance) {
    const epoch = this.epoch
    if (epoch === null) return
    try {
      const entry = JSON.stringify({ type: 'expireOwner', owner: instance })
      const seq = await this.#log.store.expireInstance(instance, this.#options.ttlMs, { leader: this.#log.instance, epoch }, entry)
      if (seq === null) return
      this.#log.roster.event('info', 'instanceExpired', `instance ${instance} missed its heartbeats for ${this.#options.ttlMs} ms: expired (entry ${seq})`, {
        instance,
        seq,
      })
      Promise.resolve(this.#log.pull()).catch(() => {})
    } catch (error) {
      // refused (no longer the leader) or the database is away: the next sweep tries again
      this.refused(error)
    }
  }

  // ---- probes --------------------------------------------------------------------

  /** A `probe` output folded while leading: run it (one per executor: probes.js), append its result with the epoch. */
  probe(executor, url) {
    if (!this.isLeader) return
    this.#log.roster.probe(executor, url, (up) => {
      if (this.isLeader) this.#log.appendLeader(JSON.stringify({ type: 'probeResult', executor, up })).catch(() => {})
    })
  }

  // ---- snapshots -----------------------------------------------------------------

  async #snapshot() {
    this.#snapshotting = true
    try {
      const seq = this.#log.foldedSeq
      const state = JSON.stringify(this.#log.roster.policy().exportState())
      const store = this.#log.store
      await store.writeSnapshot(seq, state)
      const previous = this.#lastSnapshotSeq
      this.#lastSnapshotSeq = seq
      this.#log.roster.event('debug', 'snapshotWritten', `snapshot at seq ${seq}`, { seq })
      if (previous > 0) await store.compact(previous)
    } catch (error) {
      this.#log.roster.event('warn', 'snapshotFailed', `writing a snapshot or compacting failed: ${error?.message ?? error}`, {
        error: String(error?.message ?? error),
      })
    } finally {
      this.#snapshotting = false
    }
  }
}
