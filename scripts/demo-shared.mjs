#!/usr/bin/env node
// `make demo-shared`: three instances of one shared roster, each its own process with
// 8 callers, on 4 executors x 3 slots, for a few seconds; then what each granted and
// what checking the log found (the log folded with the raw Policy, as every replica
// folds it: npm/test/shared/harness/check-log.mjs). scripts/with-postgres.sh gives it
// a scratch PostgreSQL (ROTA_PG_URL) and stops it afterwards.
//
//   node scripts/demo-shared.mjs [--seconds 5] [--callers 8] [--hold-ms 20]

import { parseArgs } from 'node:util'
import { Cluster } from '../npm/test/shared/harness/cluster.mjs'
import { describe } from '../npm/test/shared/harness/check-log.mjs'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    callers: { type: 'string', default: '8' },
    'hold-ms': { type: 'string', default: '20' },
  },
})
const url = process.env.ROTA_PG_URL
if (!url) {
  console.error('demo-shared: ROTA_PG_URL is not set (make demo-shared starts PostgreSQL for you)')
  process.exit(2)
}
const seconds = Number(values.seconds)
const cluster = new Cluster({
  url,
  roster: `demo-${Date.now()}`,
  defaults: { callers: values.callers, 'hold-ms': values['hold-ms'], 'ttl-ms': 3000, 'sweep-ms': 250, 'duration-ms': seconds * 1000, 'snapshot-every': 1_000_000 },
})
let code = 0
try {
  console.log(`==> three instances of roster '${cluster.roster}': 4 executors x 3 slots (12), ${values.callers} callers each holding a lease ${values['hold-ms']} ms, ${seconds} s`)
  // Started together; no compaction (snapshot-every), so the whole log is checked from its genesis.
  const workers = await Promise.all(['alpha', 'beta', 'gamma'].map((name) => cluster.spawn(name)))
  // Each worker stops leasing after its duration, closes its roster and exits.
  await Promise.all(workers.map((w) => w.exit))
  const result = await cluster.check()
  for (const w of workers) {
    const records = w.records()
    const grants = records.filter((r) => r.t === 'grant')
    const byExecutor = {}
    for (const g of grants) byExecutor[g.executor] = (byExecutor[g.executor] ?? 0) + 1
    const waits = grants.map((g) => g.waitMs).sort((a, b) => a - b)
    const p50 = waits.length ? waits[Math.floor(waits.length / 2)].toFixed(1) : '-'
    const leader = records.some((r) => r.t === 'leader' && r.isLeader) || records.some((r) => r.t === 'checkpoint' && r.isLeader)
    const instance = records.find((r) => r.t === 'start')?.instance
    console.log(
      `${w.name.padEnd(6)} ${instance}  granted ${String(grants.length).padStart(5)}  (${Object.entries(byExecutor)
        .sort()
        .map(([e, n]) => `${e} ${n}`)
        .join(', ')})  median wait ${p50} ms${leader ? '  [leader for a while]' : ''}`,
    )
  }
  console.log(describe(result, result.wall))
  const bad = result.overGrants.length + result.leaseGrantedTwice.length + result.wall.overlaps.length + result.endedTwice.length + result.wall.notInLog.length
  if (bad > 0) code = 1
} catch (error) {
  console.error(`demo-shared failed: ${error?.stack ?? error}`)
  code = 1
} finally {
  await cluster.close()
}
process.exit(code)
