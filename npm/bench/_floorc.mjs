import pLimit from 'p-limit'
import PQueue from 'p-queue'
import * as wasm from '../pkg/node/rota_wasm.js'
import { Policy } from '../src/node.js'
import { DRIVER_STEP } from '../src/driver.js'
const NOW = Date.UTC(2026, 0, 1)
const hold = () => new Promise((resolve) => setImmediate(resolve))
const CYCLES = 20000
async function callers(cycle) { let left = CYCLES; await Promise.all(Array.from({ length: 64 }, async () => { while (left > 0) { left -= 1; await cycle() } })) }
const cpu = () => { const u = process.cpuUsage(); return u.user + u.system }
const doc = { executors: Array.from({ length: 64 }, (_, i) => ({ id: `e${i}`, harness: 'pi', roles: ['coder'], slots: 1 })) }
const policy = new Policy(doc, { canProbe: false })
const dtick = () => policy[DRIVER_STEP]({ type: 'tick', now: NOW }, 6)
// capture the tick's bytes
let bytes, len
const orig = policy.__step
policy.__step = function (l, lvl) { const ptr = this.__ioBuffer(l); bytes = new Uint8Array(wasm.__memory?.().buffer ?? globalThis.mem, ptr, l).slice(); len = l; return orig.call(this, l, lvl) }
try { dtick() } catch (e) { console.log('capture failed', e.message) }
delete policy.__step
console.log('tick bytes', len)
const raw = () => { const ptr = policy.__ioBuffer(len); new Uint8Array(wasm.__memory().buffer, ptr, len).set(bytes); policy.__step(len, 6) }
const systems = {
  'p-limit': () => { const l = pLimit(12); return () => l(hold) },
  'p-limit + 2 driver ticks': () => { const l = pLimit(12); return () => { dtick(); return l(async () => { await hold(); dtick() }) } },
  'p-limit + 2 raw __step': () => { const l = pLimit(12); return () => { raw(); return l(async () => { await hold(); raw() }) } },
  'p-queue': () => { const q = new PQueue({ concurrency: 12 }); return () => q.add(hold) },
}
const res = {}
for (let round = 0; round < 15; round++) for (const [name, make] of Object.entries(systems)) {
  const c = make(); const t0 = cpu(); await callers(c); (res[name] ??= []).push((cpu() - t0) / CYCLES)
}
for (const [k, v] of Object.entries(res)) { v.sort((a, b) => a - b); console.log(k.padEnd(26), v[v.length >> 1].toFixed(2)) }
// tight loops
for (const [k, f] of [['driver tick', dtick], ['raw __step', raw]]) { for (let i = 0; i < 20000; i++) f(); const t0 = cpu(); for (let i = 0; i < 200000; i++) f(); console.log('tight', k, ((cpu() - t0) / 200000).toFixed(3)) }
