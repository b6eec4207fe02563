// The memory part of bench.mjs, in a process of its own (run with --expose-gc):
// RSS over the import of a Roster with 10,000 executors (one slot each, every one
// leased) and 10,000 more requests waiting. Prints one JSON line.

import { Roster } from '../src/node.js'
import * as wasm from '../pkg/node/rota_wasm.js'

const EXECUTORS = 10_000
const WAITING = 10_000
const gc = () => {
  for (let i = 0; i < 3; i += 1) globalThis.gc?.()
}

gc()
const before = process.memoryUsage()
const roster = await Roster.create({
  document: {
    executors: Array.from({ length: EXECUTORS }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: ['coder'], slots: 1 })),
  },
  probe: false,
})
const leases = []
for (let i = 0; i < EXECUTORS; i += 1) leases.push(await roster.tryLease('coder'))
const waiting = Array.from({ length: WAITING }, () => roster.lease('coder'))
gc()
const after = process.memoryUsage()
const MB = 1024 * 1024
console.log(
  JSON.stringify({
    executors: EXECUTORS,
    leased: roster.leased,
    waiting: roster.waiting,
    rssMB: (after.rss - before.rss) / MB,
    heapMB: (after.heapUsed - before.heapUsed) / MB,
    wasmMB: wasm.__memory().buffer.byteLength / MB,
  }),
)
// Keep them alive until measured.
if (leases.length + waiting.length < 0) console.log('unreachable')
process.exit(0)
