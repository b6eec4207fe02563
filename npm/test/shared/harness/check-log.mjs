// Checks a shared roster's log, and the workers' own records, for the invariants of
// DESIGN.md ("Invariants", "Several processes, one roster"). Used by the multi-process
// tests, `make demo-shared` and `make bench-shared`.
//
// checkLog reads the log with PgLogStore (rota_read) and folds it with the raw Policy
// exactly as sql/PROTOCOL.md says: `Policy(D, O)` from the genesis at seq 1 (or
// `importState` of the latest snapshot once the log was compacted), then for every
// other entry the bytes `{"now":N,` + entry.slice(1) through `handleJson`. Over the
// core's outputs it counts, independently of the core's own bookkeeping:
//   - over-grants: a `granted` (not `occupied`) that puts an executor's held leases
//     above its slots, and a lease id granted twice;
//   - requests that ended more than once, and requests still open (no end) at the
//     log's end: a request ends by granted, unavailable, cancelled, timedOut, exhausted;
//   - grants per owner (instance), the epochs of leader-only entries, owner expiries.
// checkOverlaps reads the workers' JSONL records and looks for wall-clock overlaps:
// more leases in use on one executor at one instant than it has slots, across every
// process, and grants a worker saw that the log does not have (lease, request,
// executor and owner must all agree).

import { readFileSync } from 'node:fs'
import { Policy } from '../../../src/node.js'
import { PgLogStore } from '../../../src/shared/index.js'

const ENDS = new Set(['granted', 'unavailable', 'cancelled', 'timedOut', 'exhausted'])
const REQUESTS = new Set(['lease', 'tryLease', 'occupy'])

// Slots per executor as the replica has them now (the core's snapshot query).
function capacities(policy) {
  const slots = new Map()
  for (const e of policy.snapshot().executors) slots.set(e.id, e.slots)
  return slots
}

/** Every entry of `roster`'s log from `from`, in order (pages of 5,000). */
export async function readLog(store, from = 1) {
  const rows = []
  for (let next = from; ; ) {
    const page = await store.readFrom(next, { limit: 5000 })
    rows.push(...page)
    if (page.length < 5000) return rows
    next = page[page.length - 1].seq + 1
  }
}

/**
 * Folds one roster's log and counts what breaks an invariant.
 * @param {{ connectionString?: string, store?: PgLogStore, roster?: string,
 *           hashesAt?: Iterable<number> }} options `hashesAt`: seqs at which to record
 *   the fold's stateHash (to compare with the instances' checkpoints).
 */
export async function checkLog({ connectionString, store, roster, hashesAt = [] } = {}) {
  const own = store === undefined
  if (own) store = await PgLogStore.connect({ connectionString, roster })
  try {
    let rows
    let policy
    let fromSnapshot = null
    try {
      rows = await readLog(store, 1)
    } catch (error) {
      if (error?.code !== 'COMPACTED') throw error
      rows = null
    }
    const held = new Map() // lease id -> { executor, owner, request, occupied }
    const result = {
      roster: store.roster,
      entries: 0,
      fromSnapshot,
      lastSeq: 0,
      rejected: [], // { seq, instance, type, code }
      grants: 0,
      grantsByOwner: {},
      overGrants: [], // { seq, executor, held, slots, lease }
      leaseGrantedTwice: [],
      requests: 0,
      endedTwice: [],
      open: [],
      expiries: [], // { seq, now, owner, by, epoch, released, cancelled }
      epochs: [], // distinct epochs of leader-only entries, in log order
      leaseEnds: new Map(), // lease id -> { seq, now, by: 'release' | 'expireOwner' }
      grantsByLease: new Map(), // lease id -> { seq, now, owner, request, executor }
      hashes: new Map(),
      stateHash: null,
      policy: null,
    }
    const ends = new Map() // request id -> count
    const seenLeases = new Set()

    if (rows === null || rows.length === 0 || rows[0].seq !== 1) {
      // Compacted: start from the latest snapshot, as a late instance does.
      const snapshot = await store.latestSnapshot()
      if (snapshot === null) {
        if (rows !== null && rows.length === 0) return { ...result, empty: true }
        throw new Error(`${store.roster}: the log is compacted and has no snapshot`)
      }
      const state = JSON.parse(snapshot.state)
      policy = Policy.importState(state)
      fromSnapshot = snapshot.seq
      result.fromSnapshot = fromSnapshot
      rows = await readLog(store, snapshot.seq + 1)
      for (const [id, lease] of Object.entries(state.leases ?? {})) {
        held.set(Number(id), { executor: lease.executor, owner: lease.owner, request: lease.request, occupied: lease.occupied === true })
        seenLeases.add(Number(id))
      }
    } else {
      const genesis = JSON.parse(rows[0].entry)
      if (genesis.type !== 'genesis') throw new Error(`${store.roster}: seq 1 is not a genesis`)
      policy = new Policy(genesis.document, genesis.options ?? undefined)
      rows = rows.slice(1)
      result.lastSeq = 1
    }
    const wanted = new Set(hashesAt)
    // A checkpoint at the snapshot's own seq compares with the imported state.
    if (fromSnapshot !== null && wanted.has(fromSnapshot)) result.hashes.set(fromSnapshot, policy.stateHash())
    let slots = capacities(policy)
    const busy = new Map()
    for (const l of held.values()) if (!l.occupied) busy.set(l.executor, (busy.get(l.executor) ?? 0) + 1)
    let lastEpoch = null

    for (const row of rows) {
      result.entries++
      result.lastSeq = row.seq
      if (row.epoch !== null && row.epoch !== lastEpoch) {
        result.epochs.push({ epoch: row.epoch, seq: row.seq, instance: row.instance })
        lastEpoch = row.epoch
      }
      const type = /^\{"type":"([A-Za-z]+)"/.exec(row.entry)?.[1]
      if (type === 'genesis') continue // a racing genesis past seq 1: skipped by every replica
      const answer = JSON.parse(policy.handleJson(`{"now":${row.now},${row.entry.slice(1)}`))
      if (answer.error !== undefined) {
        result.rejected.push({ seq: row.seq, instance: row.instance, type, code: answer.error.code })
      } else {
        if (REQUESTS.has(type)) result.requests++
        if (type === 'reload') slots = capacities(policy)
        for (const out of answer.outputs) {
          if (ENDS.has(out.type)) ends.set(out.request, (ends.get(out.request) ?? 0) + 1)
          if (out.type === 'waiting' && !ends.has(out.request)) ends.set(out.request, 0)
          if (out.type === 'granted') {
            result.grants++
            result.grantsByOwner[out.owner] = (result.grantsByOwner[out.owner] ?? 0) + 1
            if (seenLeases.has(out.lease)) result.leaseGrantedTwice.push({ seq: row.seq, lease: out.lease })
            seenLeases.add(out.lease)
            const occupied = out.occupied === true
            held.set(out.lease, { executor: out.executor, owner: out.owner, request: out.request, occupied })
            result.grantsByLease.set(out.lease, { seq: row.seq, now: row.now, owner: out.owner, request: out.request, executor: out.executor })
            if (!occupied) {
              const n = (busy.get(out.executor) ?? 0) + 1
              busy.set(out.executor, n)
              const cap = slots.get(out.executor) ?? 0
              if (n > cap) result.overGrants.push({ seq: row.seq, executor: out.executor, held: n, slots: cap, lease: out.lease })
            }
          } else if (out.type === 'event' && out.name === 'released') {
            const lease = held.get(out.fields.lease)
            if (lease !== undefined) {
              held.delete(out.fields.lease)
              if (!lease.occupied) busy.set(lease.executor, busy.get(lease.executor) - 1)
            }
            result.leaseEnds.set(out.fields.lease, { seq: row.seq, now: row.now, by: type })
          } else if (out.type === 'event' && out.name === 'ownerExpired') {
            result.expiries.push({
              seq: row.seq,
              now: row.now,
              owner: out.fields.owner,
              by: row.instance,
              epoch: row.epoch,
              released: out.fields.released,
              cancelled: out.fields.cancelled,
            })
          }
        }
      }
      if (wanted.has(row.seq)) result.hashes.set(row.seq, policy.stateHash())
    }
    for (const [request, n] of ends) {
      if (n > 1) result.endedTwice.push({ request, ends: n })
      if (n === 0) result.open.push(request)
    }
    result.stateHash = policy.stateHash()
    result.held = [...held.entries()].map(([lease, l]) => ({ lease, ...l }))
    result.policy = policy
    return result
  } finally {
    if (own) await store.close()
  }
}

/** The records of one worker's JSONL file (a torn last line, from a kill -9, is skipped). */
export function readRecords(path) {
  let text
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return []
  }
  const out = []
  for (const line of text.split('\n')) {
    if (line === '') continue
    try {
      out.push(JSON.parse(line))
    } catch {
      // a line cut short by a kill
    }
  }
  return out
}

/**
 * Wall-clock overlaps across processes, and worker grants the log does not have.
 * @param {Array<Array<object>>} workers each worker's records
 * @param {Awaited<ReturnType<typeof checkLog>>} log
 * @param {{ stops?: Array<{ pid: number, ms: number }> }} options the moments the harness
 *   stopped or killed a process (monotonic ms). A lease the log released by expiring its
 *   owner counts as in use only until its process was stopped or killed: what it does
 *   with a lease after it was fenced is outside rota's reach (README, "Shared roster").
 */
export function checkOverlaps(workers, log, { stops = [] } = {}) {
  const slots = capacities(log.policy)
  const intervals = []
  const notInLog = []
  const open = new Map()
  for (const records of workers) {
    for (const r of records) {
      if (r.t === 'grant') {
        open.set(`${r.pid}/${r.lease}/${r.request}`, r)
        const logged = log.grantsByLease.get(r.lease)
        if (logged === undefined ? log.fromSnapshot === null : logged.request !== r.request || logged.executor !== r.executor || logged.owner !== r.instance) {
          notInLog.push({ worker: r, log: logged ?? null })
        }
      } else if (r.t === 'release') {
        const key = `${r.pid}/${r.lease}/${r.request}`
        const g = open.get(key)
        if (g === undefined) continue
        open.delete(key)
        intervals.push({ pid: r.pid, lease: r.lease, executor: r.executor, from: g.settledMs ?? g.ms, to: r.ms })
      }
    }
  }
  // A grant with no release: the process died or was stopped holding it; in use until then.
  const lastSeen = new Map()
  for (const records of workers) for (const r of records) lastSeen.set(r.pid, Math.max(lastSeen.get(r.pid) ?? 0, r.ms))
  for (const g of open.values()) intervals.push({ pid: g.pid, lease: g.lease, executor: g.executor, from: g.settledMs ?? g.ms, to: lastSeen.get(g.pid) })
  for (const i of intervals) {
    if (log.leaseEnds.get(i.lease)?.by !== 'expireOwner') continue
    for (const s of stops) if (s.pid === i.pid && s.ms >= i.from && s.ms < i.to) i.to = s.ms
  }
  // A sweep over the interval ends per executor: ends before starts at the same instant.
  const points = []
  for (const i of intervals) {
    if (!(i.to > i.from)) continue // in use for no time (a grant a kill cut short at once)
    points.push({ at: i.from, d: 1, i })
    points.push({ at: i.to, d: -1, i })
  }
  points.sort((a, b) => a.at - b.at || a.d - b.d)
  const inUse = new Map() // executor -> Set of intervals
  const overlaps = []
  let maxBusy = 0
  for (const p of points) {
    let set = inUse.get(p.i.executor)
    if (set === undefined) inUse.set(p.i.executor, (set = new Set()))
    if (p.d > 0) set.add(p.i)
    else set.delete(p.i)
    maxBusy = Math.max(maxBusy, set.size)
    if (p.d > 0 && set.size > (slots.get(p.i.executor) ?? 0)) {
      const with_ = [...set].map((i) => ({ lease: i.lease, pid: i.pid, from: i.from, to: i.to, end: log.leaseEnds.get(i.lease) ?? null }))
      overlaps.push({ executor: p.i.executor, inUse: set.size, slots: slots.get(p.i.executor), at: p.at, lease: p.i.lease, pid: p.i.pid, with: with_ })
    }
  }
  return { intervals: intervals.length, overlaps, notInLog, maxBusy, stops }
}

function rejectedKinds(rejected) {
  if (rejected.length === 0) return ''
  const counts = {}
  for (const r of rejected) counts[`${r.type} ${r.code}`] = (counts[`${r.type} ${r.code}`] ?? 0) + 1
  return ` (${Object.entries(counts)
    .map(([k, n]) => `${k}: ${n}`)
    .join(', ')})`
}

/** A one-paragraph summary of checkLog (+ checkOverlaps) for people. */
export function describe(log, wall) {
  const overGrants = log.overGrants.length + log.leaseGrantedTwice.length
  const lines = [
    `log ${log.roster}: ${log.entries} entries${log.fromSnapshot === null ? ' from the genesis' : ` after the snapshot at seq ${log.fromSnapshot}`}, ${log.grants} grants, ${log.requests} requests`,
    `${overGrants} over-grants (an executor above its slots: ${log.overGrants.length}; a lease granted twice: ${log.leaseGrantedTwice.length})`,
    `requests ended twice: ${log.endedTwice.length}; still open: ${log.open.length}; rejected entries: ${log.rejected.length}${rejectedKinds(log.rejected)}`,
  ]
  if (wall !== undefined) lines.push(`wall-clock overlaps above slots: ${wall.overlaps.length} (over ${wall.intervals} leases in use); grants the log does not have: ${wall.notInLog.length}`)
  return lines.join('\n')
}
