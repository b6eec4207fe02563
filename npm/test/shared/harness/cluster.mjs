// Several worker processes (worker.mjs) against one shared roster, for the tests, the
// demo and the benchmark: spawn, signal (with the moment of every stop or kill, on the
// monotonic clock the workers log), wait for conditions with deadlines, quiesce,
// stop, and check the log and the records (check-log.mjs).

import { spawn, execFileSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { PgLogStore } from '../../../src/shared/index.js'
import { checkLog, checkOverlaps, readRecords } from './check-log.mjs'

const here = dirname(fileURLToPath(import.meta.url))
export const ROOT = join(here, '..', '..', '..', '..')
const WORKER = join(here, 'worker.mjs')
const POSTGRES = join(ROOT, 'scripts', 'postgres.sh')

export const monoMs = () => Number(process.hrtime.bigint()) / 1e6

/**
 * Waits (synchronously, a few µs as a rule) until `pid` is stopped or dead by its
 * /proc state: T or t (stopped), Z or X (dead), or gone.
 */
function untilNotRunning(pid, deadlineMs = 2000) {
  const end = monoMs() + deadlineMs
  for (;;) {
    let state
    try {
      // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      state = stat[stat.lastIndexOf(')') + 2]
    } catch (error) {
      if (error?.code === 'ENOENT') return
      throw error
    }
    if ('TtZX'.includes(state)) return
    if (monoMs() > end) throw new Error(`process ${pid} still runs (state ${state}) ${deadlineMs} ms after the signal`)
  }
}

/** Waits until `check()` is truthy (and returns it), failing after `ms` with `what`. */
export async function until(what, check, ms = 10_000, every = 20) {
  const end = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(every)
  }
}

/**
 * A PostgreSQL server of its own (scripts/postgres.sh with its own ROTA_PG_DIR), for
 * tests that stop the database: they must not cut another test's server.
 */
export class PrivatePostgres {
  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'rota-pg-private-'))
    // As root the server runs as `postgres`, which must reach the directory inside.
    chmodSync(this.dir, 0o755)
    this.env = { ...process.env, ROTA_PG_DIR: join(this.dir, 'pg') }
  }

  #run(command) {
    return execFileSync(POSTGRES, [command], { env: this.env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim()
  }

  start() {
    this.url = this.#run('start')
    return this.url
  }

  /** An outage: the server stops, its data stays. */
  down() {
    this.#run('down')
  }

  up() {
    this.#run('up')
  }

  stop() {
    try {
      this.#run('stop')
    } finally {
      rmSync(this.dir, { recursive: true, force: true })
    }
  }
}

let clusters = 0

/**
 * The workers' flags the multi-process tests share: short TTLs (a test waits out
 * expiries in seconds), a sweep every 100 ms, no snapshots (the whole log is checked),
 * a checkpoint every 100 ms. A test spreads it and sets `callers` and its own flags.
 */
export const WORKER_DEFAULTS = Object.freeze({
  callers: 8,
  'hold-ms': 5,
  'ttl-ms': 1500,
  'leader-ttl-ms': 900,
  'sweep-ms': 100,
  'snapshot-every': 1_000_000,
  'checkpoint-ms': 100,
})

export class Cluster {
  /**
   * @param {{ url: string, roster?: string, dir?: string, defaults?: Record<string, string | number | boolean> }} options
   *   `defaults`: worker.mjs flags (without the dashes) for every worker.
   */
  constructor({ url, roster, dir, defaults = {} }) {
    this.url = url
    this.roster = roster ?? `multi-${process.pid}-${Date.now()}-${++clusters}`
    this.dir = dir ?? mkdtempSync(join(tmpdir(), 'rota-multi-'))
    this.ownsDir = dir === undefined
    this.defaults = defaults
    this.workers = []
    this.stops = [] // { pid, ms, signal }
    this.store = null
  }

  async admin() {
    this.store ??= await PgLogStore.connect({ connectionString: this.url, roster: this.roster, max: 2 })
    return this.store
  }

  /** Starts a worker; resolves once it logged `start` (its roster is open). */
  async spawn(name, flags = {}, { ready = true } = {}) {
    const log = join(this.dir, `${name}-${this.workers.length}.jsonl`)
    const all = { ...this.defaults, ...flags, url: this.url, roster: this.roster, name, log }
    const argv = [WORKER]
    for (const [k, v] of Object.entries(all)) {
      if (v === false || v === undefined) continue
      argv.push(`--${k}`)
      if (v !== true) argv.push(String(v))
    }
    const proc = spawn(process.execPath, argv, { stdio: ['ignore', 'inherit', 'inherit'] })
    const worker = {
      name,
      log,
      proc,
      pid: proc.pid,
      alive: true,
      exit: new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal }))),
      records: () => readRecords(log),
    }
    worker.exit.then(() => {
      worker.alive = false
    })
    this.workers.push(worker)
    if (ready) {
      await until(
        `${name} to open its roster`,
        () => {
          if (!worker.alive) throw new Error(`${name} exited before it opened its roster`)
          return worker.records().some((r) => r.t === 'start')
        },
        20_000,
      )
    }
    return worker
  }

  /**
   * Sends `sig`; a stop or a kill is noted with its moment (for checkOverlaps): the
   * first moment the process has surely stopped running. kill() returns once the signal
   * is queued, and the process may run on a little (a moment noted before the signal
   * took effect once missed a grant it settled 0.4 ms later, and counted the lease in
   * use through the whole stop).
   */
  signal(worker, sig) {
    process.kill(worker.pid, sig)
    if (sig === 'SIGKILL' || sig === 'SIGSTOP') {
      untilNotRunning(worker.pid)
      this.stops.push({ pid: worker.pid, ms: monoMs(), wall: Date.now(), signal: sig })
    }
  }

  live() {
    return this.workers.filter((w) => w.alive)
  }

  /** The newest record of `worker` matching `pred`, or undefined. */
  static last(worker, pred) {
    const records = worker.records()
    for (let i = records.length - 1; i >= 0; i--) if (pred(records[i])) return records[i]
    return undefined
  }

  /** The instance id a worker has now (its latest record naming one). */
  static instance(worker) {
    return Cluster.last(worker, (r) => typeof r.instance === 'string')?.instance
  }

  /** Waits until every live worker (or `workers`) logged a grant after `sinceMs` (monotonic). */
  async untilGranting(workers = this.live(), sinceMs = monoMs(), ms = 15_000) {
    await until(`${workers.map((w) => w.name).join(', ')} to grant`, () => workers.every((w) => w.records().some((r) => r.t === 'grant' && r.ms > sinceMs)), ms)
  }

  /**
   * Stops leasing everywhere (SIGUSR1) and waits until every live worker has folded
   * the whole log: their latest checkpoints at the log's head. Returns those checkpoints.
   */
  async quiesce(ms = 20_000) {
    const live = this.live()
    for (const w of live) process.kill(w.pid, 'SIGUSR1')
    await until('every worker to stop leasing', () => live.every((w) => w.records().some((r) => r.t === 'idle')), ms)
    const store = await this.admin()
    return until(
      'every worker to fold the whole log',
      async () => {
        const { lastSeq } = await store.head()
        for (const w of live) process.kill(w.pid, 'SIGUSR2')
        await sleep(30)
        const points = live.map((w) => Cluster.last(w, (r) => r.t === 'checkpoint'))
        return points.every((p) => p !== undefined && p.foldedSeq === lastSeq) ? points : null
      },
      ms,
      50,
    )
  }

  /** SIGTERM to every live worker (they close their rosters), SIGKILL after `ms`. */
  async stopAll(ms = 15_000) {
    const live = this.live()
    for (const w of live) {
      try {
        process.kill(w.pid, 'SIGCONT')
        process.kill(w.pid, 'SIGTERM')
      } catch {
        // gone already
      }
    }
    const timer = setTimeout(() => {
      for (const w of live) if (w.alive) process.kill(w.pid, 'SIGKILL')
    }, ms)
    await Promise.all(live.map((w) => w.exit))
    clearTimeout(timer)
  }

  /**
   * Checks the log and every worker's records. Returns checkLog's result plus `wall`
   * (checkOverlaps) and `hashMismatches`: checkpoints whose hash differs from the fold
   * of the log at the same seq.
   */
  async check() {
    const records = this.workers.map((w) => w.records())
    const points = records.flat().filter((r) => r.t === 'checkpoint' && r.foldedSeq > 0)
    const log = await checkLog({ store: await this.admin(), hashesAt: points.map((p) => p.foldedSeq) })
    const wall = checkOverlaps(records, log, { stops: this.stops })
    const hashMismatches = points.filter((p) => log.hashes.has(p.foldedSeq) && log.hashes.get(p.foldedSeq) !== p.hash)
    const hashesCompared = points.filter((p) => log.hashes.has(p.foldedSeq)).length
    return { ...log, wall, hashMismatches, hashesCompared, records }
  }

  async close() {
    for (const w of this.live()) {
      try {
        process.kill(w.pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
    await Promise.all(this.workers.map((w) => w.exit))
    await this.store?.close().catch(() => {})
    if (this.ownsDir && !process.env.ROTA_KEEP_LOGS) rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Grants per process (summed over its incarnations), from the workers' records. */
export function grantsPerWorker(cluster) {
  const out = {}
  for (const w of cluster.workers) out[w.name] = (out[w.name] ?? 0) + w.records().filter((r) => r.t === 'grant').length
  return out
}

/** The largest relative deviation from the mean, in percent. */
export function spread(counts) {
  const values = Object.values(counts)
  const mean = values.reduce((a, b) => a + b, 0) / values.length
  return mean === 0 ? 0 : (Math.max(...values.map((v) => Math.abs(v - mean))) / mean) * 100
}
