#!/usr/bin/env node
// `make bench-shared`: the shared roster across 3 processes on one PostgreSQL, beside
// the embedded roster in the same run. A benchmark, not a test: it prints each figure
// beside its target (issue 18) and the figures live in README.md here.
//
//   ROTA_PG_URL=... node npm/bench/shared/bench.mjs [--seconds 5] [--only embedded,contended,uncontended,fairness,append,recovery]
//
// Cases (every lease held for one setImmediate, hold 0):
//   contended    3 instances x 8 callers on 12 slots (4 executors x 3): leases/s across
//                the 3, grant latency (lease() call to grant) p50/p99, fairness;
//   uncontended  3 instances x 1 caller on 12 slots (a slot is always free): the cost of
//                one lease through the log, p50/p99, leases/s;
//   embedded     the same two shapes on the embedded roster in this process (24 callers
//                / 3 callers, no database);
//   fairness     3 instances x 8 callers on 12 slots, each lease held 20 ms: the queue is
//                always deep, so grants per instance show the one fair queue (with hold 0
//                a caller's turn is its own instance's round trip, and the contended case's
//                spread measures that instead);
//   append       the floor under every figure: one PgLogStore.append of one entry
//                (rota_append, one commit), 3 appenders at once, p50/p99, from this process;
//   recovery     3 instances x 8 callers on 12 slots, TTL 2 s: one follower is killed
//                (kill -9) while it holds leases; the time from the kill to the log's
//                expiry of it (which grants its slots to the waiting callers of others).

import { parseArgs } from 'node:util'
import { loadavg } from 'node:os'
import { Roster } from '../../src/node.js'
import { Cluster, grantsPerWorker, spread, until, monoMs } from '../../test/shared/harness/cluster.mjs'

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, only: { type: 'string' } } })
const url = process.env.ROTA_PG_URL
if (!url) {
  console.error('bench-shared: ROTA_PG_URL is not set (make bench-shared starts PostgreSQL for you)')
  process.exit(2)
}
const seconds = Number(values.seconds)
const only = values.only ? new Set(values.only.split(',')) : null
const want = (name) => only === null || only.has(name)
const DOCUMENT = { executors: [0, 1, 2, 3].map((i) => ({ id: `e${i}`, harness: 'bench', roles: ['coder'], slots: 3 })) }
const WARMUP_MS = 1000

const pct = (sorted, p) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))])
const fmt = (n, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : '-')
const rows = []
function figure(name, value, unit, target, ok) {
  rows.push({ name, value, unit, target, ok })
  console.log(`  ${name.padEnd(46)} ${String(value).padStart(10)} ${unit.padEnd(9)} target ${target.padEnd(16)} ${ok === undefined ? '' : ok ? 'met' : 'NOT met'}`)
}

/** Runs workers for `seconds` after a warm-up; leases/s and latency over the measured window. */
async function sharedRun(label, callers, extra = {}) {
  const cluster = new Cluster({
    url,
    roster: `bench-${label}-${Date.now()}`,
    // Each worker leases for its duration from its own start: long enough that the
    // window below (all three leasing) is inside every worker's run.
    defaults: { callers, 'hold-ms': 0, 'ttl-ms': 10_000, 'checkpoint-ms': 1000, 'duration-ms': WARMUP_MS + seconds * 1000 + 5000, ...extra },
  })
  try {
    // Started together: the window waits for the last one to start.
    const workers = await Promise.all(['a', 'b', 'c'].map((name) => cluster.spawn(name)))
    await Promise.all(workers.map((w) => w.exit))
    const records = workers.map((w) => w.records())
    // The measured window: from WARMUP after the last start to `seconds` later, which
    // must end before the first worker stopped leasing.
    const starts = records.map((r) => r.find((x) => x.t === 'start').ms)
    const start = Math.max(...starts) + WARMUP_MS
    const end = start + seconds * 1000
    const firstStop = Math.min(...records.map((r) => r.find((x) => x.t === 'done')?.ms ?? Infinity))
    if (end > firstStop) throw new Error(`bench-shared: the workers started ${Math.round(Math.max(...starts) - Math.min(...starts))} ms apart; the window does not fit their runs`)
    const grants = records.map((r) => r.filter((x) => x.t === 'grant' && x.ms >= start && x.ms < end))
    const waits = grants.flat().map((g) => g.waitMs).sort((a, b) => a - b)
    const perWorker = Object.fromEntries(workers.map((w, i) => [w.name, grants[i].length]))
    const check = await cluster.check()
    // Where the time goes: each process's CPU over its whole run, per grant it saw folded.
    const done = records.map((r) => r.find((x) => x.t === 'done'))
    const allGrants = records.reduce((n, r) => n + r.filter((x) => x.t === 'grant').length, 0)
    const cpuMs = done.reduce((n, d) => n + (d?.cpuMs ?? 0), 0)
    const runS = (Math.max(...done.map((d) => d?.ms ?? 0)) - Math.min(...starts)) / 1000
    return {
      cpuPerLease: cpuMs / allGrants,
      cpuShare: cpuMs / 1000 / runS,
      leasesPerS: grants.flat().length / seconds,
      p50: pct(waits, 50),
      p99: pct(waits, 99),
      perWorker,
      fairness: spread(perWorker),
      overGrants: check.overGrants.length + check.leaseGrantedTwice.length + check.wall.overlaps.length,
      entries: check.entries,
    }
  } finally {
    await cluster.close()
  }
}

/** The embedded roster with the same document, `callers` callers, hold 0. */
async function embeddedRun(callers) {
  const roster = await Roster.create({ document: DOCUMENT, probe: false })
  let measuring = false
  let stop = false
  const waits = []
  let count = 0
  const loop = async () => {
    while (!stop) {
      const t = process.hrtime.bigint()
      const lease = await roster.lease('coder')
      if (measuring) {
        waits.push(Number(process.hrtime.bigint() - t) / 1e6)
        count++
      }
      await new Promise((resolve) => setImmediate(resolve))
      lease.release()
    }
  }
  const loops = Array.from({ length: callers }, loop)
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS))
  measuring = true
  const t0 = monoMs()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  measuring = false
  const elapsed = (monoMs() - t0) / 1000
  stop = true
  await Promise.all(loops)
  await roster.close()
  waits.sort((a, b) => a - b)
  return { leasesPerS: count / elapsed, p50: pct(waits, 50), p99: pct(waits, 99) }
}

/** One-entry appends from `n` concurrent appenders for `seconds`: the round trip of rota_append. */
async function appendFloor(n) {
  const { PgLogStore } = await import('../../src/shared/index.js')
  const store = await PgLogStore.connect({ connectionString: url, roster: `bench-append-${Date.now()}`, max: n })
  const times = []
  let stop = false
  let measuring = false
  const loop = async (i) => {
    while (!stop) {
      const t = process.hrtime.bigint()
      await store.append(['{"type":"tick"}'], { instance: `bench-${i}` })
      if (measuring) times.push(Number(process.hrtime.bigint() - t) / 1e6)
    }
  }
  const loops = Array.from({ length: n }, (_, i) => loop(i))
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS))
  measuring = true
  await new Promise((resolve) => setTimeout(resolve, Math.min(seconds, 3) * 1000))
  stop = true
  await Promise.all(loops)
  await store.close()
  times.sort((a, b) => a - b)
  return { p50: pct(times, 50), p99: pct(times, 99), perS: times.length / Math.min(seconds, 3) }
}

async function recovery() {
  const TTL = 2000
  const cluster = new Cluster({
    url,
    roster: `bench-recovery-${Date.now()}`,
    defaults: { callers: 8, 'hold-ms': 20, 'ttl-ms': TTL, 'leader-ttl-ms': 1200, 'sweep-ms': 100, 'checkpoint-ms': 100 },
  })
  try {
    for (const name of ['a', 'b', 'c']) await cluster.spawn(name)
    await cluster.untilGranting()
    const leader = await until('a leader', () => cluster.live().find((w) => Cluster.last(w, (r) => r.t === 'checkpoint')?.isLeader), 10_000)
    const victim = cluster.live().find((w) => w !== leader)
    const id = Cluster.instance(victim)
    cluster.signal(victim, 'SIGKILL')
    const killed = Date.now()
    await victim.exit
    const expiry = await until('the expiry', async () => (await cluster.check()).expiries.find((e) => e.owner === id), 20_000, 50)
    await cluster.stopAll()
    const check = await cluster.check()
    const regranted = [...check.grantsByLease.values()].filter((g) => g.seq === expiry.seq).length
    return { ms: expiry.now - killed, ttl: TTL, released: expiry.released.length, regranted, overGrants: check.overGrants.length + check.wall.overlaps.length }
  } finally {
    await cluster.close()
  }
}

console.log(`bench-shared: ${seconds} s per case after a ${WARMUP_MS} ms warm-up; load average at start ${loadavg().map((l) => l.toFixed(2)).join(' ')}`)
const results = {}
if (want('embedded')) {
  results.embeddedContended = await embeddedRun(24)
  results.embeddedUncontended = await embeddedRun(3)
}
if (want('contended')) results.contended = await sharedRun('contended', 8)
if (want('uncontended')) results.uncontended = await sharedRun('uncontended', 1)
if (want('fairness')) results.fairness = await sharedRun('fairness', 8, { 'hold-ms': 20 })
if (want('append')) results.append = await appendFloor(3)
if (want('recovery')) results.recovery = await recovery()

console.log('\nfigure                                              value unit      target')
const c = results.contended
const u = results.uncontended
const ec = results.embeddedContended
const eu = results.embeddedUncontended
if (c) {
  figure('contended: leases/s across 3 instances (3x8 on 12)', fmt(c.leasesPerS, 0), 'leases/s', '>= 1,000', c.leasesPerS >= 1000)
  figure('contended: grant latency p50', fmt(c.p50, 2), 'ms', '', undefined)
  figure('contended: grant latency p99', fmt(c.p99, 2), 'ms', '<= 60 ms', c.p99 <= 60)
  figure('contended: spread of grants per instance (hold 0)', fmt(c.fairness, 1), '%', '(see fairness)', undefined)
  figure('contended: over-grants (log + wall clock)', c.overGrants, '', '0', c.overGrants === 0)
  figure('contended: worker CPU per lease (3 processes)', fmt(c.cpuPerLease, 3), 'ms', '', undefined)
  figure('contended: worker CPU used, cores', fmt(c.cpuShare, 2), 'cores', '', undefined)
}
if (u) {
  figure('uncontended: leases/s (3x1 on 12)', fmt(u.leasesPerS, 0), 'leases/s', '', undefined)
  figure('uncontended: grant latency p50', fmt(u.p50, 2), 'ms', '<= 5 ms', u.p50 <= 5)
  figure('uncontended: grant latency p99', fmt(u.p99, 2), 'ms', '', undefined)
  figure('uncontended: worker CPU per lease (3 processes)', fmt(u.cpuPerLease, 3), 'ms', '', undefined)
}
if (results.fairness) {
  const f = results.fairness
  figure('fairness: max deviation from mean (3x8, hold 20 ms)', fmt(f.fairness, 1), '%', '<= 5 %', f.fairness <= 5)
  figure('fairness case: leases/s, p99', `${fmt(f.leasesPerS, 0)}, ${fmt(f.p99, 1)}`, 'ms', '', undefined)
}
if (results.append) {
  const a = results.append
  figure('floor: one rota_append round trip p50 / p99 (3 at once)', `${fmt(a.p50, 2)}/${fmt(a.p99, 2)}`, 'ms', '', undefined)
  figure('floor: appends/s (3 appenders, one entry each)', fmt(a.perS, 0), '/s', '', undefined)
}
if (ec) {
  figure('embedded contended: leases/s (24 callers on 12)', fmt(ec.leasesPerS, 0), 'leases/s', '(beside)', undefined)
  figure('embedded contended: grant latency p50 / p99', `${fmt(ec.p50, 3)}/${fmt(ec.p99, 3)}`, 'ms', '(beside)', undefined)
  figure('embedded uncontended: leases/s (3 callers)', fmt(eu.leasesPerS, 0), 'leases/s', '(beside)', undefined)
  figure('embedded uncontended: grant latency p50 / p99', `${fmt(eu.p50, 3)}/${fmt(eu.p99, 3)}`, 'ms', '(beside)', undefined)
}
if (results.recovery) {
  const r = results.recovery
  figure(`recovery after kill -9 (TTL ${r.ttl} ms)`, r.ms, 'ms', `<= ${r.ttl + 500} ms`, r.ms <= r.ttl + 500)
  figure('recovery: leases released / re-granted at once', `${r.released}/${r.regranted}`, '', '', undefined)
}
if (c) console.log(`\ncontended grants per instance: ${JSON.stringify(c.perWorker)}; log entries ${c.entries}`)
if (results.fairness) console.log(`fairness grants per instance: ${JSON.stringify(results.fairness.perWorker)}`)
if (u) console.log(`uncontended grants per instance: ${JSON.stringify(u.perWorker)}; log entries ${u.entries}`)
console.log(`load average at the end ${loadavg().map((l) => l.toFixed(2)).join(' ')}`)
