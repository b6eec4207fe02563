// Benchmark (not a test): lease + release cycles through the raw Policy class and
// through the Roster driver, at 4 and 1,024 executors, uncontended and contended;
// and the size of the WebAssembly module, raw and gzipped.
//
//   node bench/bench.mjs [--quick]
//
// Target: the raw class under 3 µs per lease+release cycle. Budget: 150 KB gzipped
// for the web build's .wasm.
//
// Last figures (Node 20, a shared 2-core machine at load ~1, best round; issue 4): raw
// Policy.handle 2.42 / 2.88 µs per cycle at 4 / 1,024 executors with the defaults,
// 1.86 / 2.19 µs with minEventLevel 'warn' (the binary step of the Node build);
// handleJson 6.3 / 6.8 µs; Roster lease()+release() 3.9 / 4.4 µs. The web build's
// module 375,241 bytes, 149,928 gzipped (the Node build's, made for speed: 429,517 /
// 168,910). Before issue 4's work on them: 8.93 / 9.35 µs (6.90 / 7.53 with 'warn'),
// one module of 624,560 / 215,143 bytes.

import { readFileSync } from 'node:fs'
import { gzipSync } from 'node:zlib'
import { Policy, Roster } from '../src/node.js'

const quick = process.argv.includes('--quick')
const NOW = Date.UTC(2026, 0, 1)

const roster = (executors, slots = 2) => ({
  executors: Array.from({ length: executors }, (_, i) => ({
    id: `e${i}`,
    harness: 'pi',
    roles: ['coder'],
    slots,
  })),
})

// On a shared machine wall time includes other processes' turns: each round also
// records this process's CPU time (process.cpuUsage), and the best round of each wins.
const cpuNow = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** Runs `cycle` in rounds until `ms` have passed; returns µs per cycle (best round). */
async function measure(cycle, { ms = quick ? 300 : 1_500, batch = 1_000 } = {}) {
  for (let i = 0; i < batch; i += 1) await cycle(i) // warm up (tier-up)
  let best = Infinity
  let bestCpu = Infinity
  let n = batch
  const end = performance.now() + ms
  while (performance.now() < end) {
    const t0 = performance.now()
    const c0 = cpuNow()
    for (let i = 0; i < batch; i += 1) await cycle(n + i)
    best = Math.min(best, ((performance.now() - t0) * 1_000) / batch)
    bestCpu = Math.min(bestCpu, (cpuNow() - c0) / batch)
    n += batch
  }
  return { best, bestCpu }
}

function measureSync(cycle, { ms = quick ? 300 : 1_500, batch = 2_000 } = {}) {
  for (let i = 0; i < batch; i += 1) cycle(i)
  let best = Infinity
  let bestCpu = Infinity
  let n = batch
  const end = performance.now() + ms
  while (performance.now() < end) {
    const t0 = performance.now()
    const c0 = cpuNow()
    for (let i = 0; i < batch; i += 1) cycle(n + i)
    best = Math.min(best, ((performance.now() - t0) * 1_000) / batch)
    bestCpu = Math.min(bestCpu, (cpuNow() - c0) / batch)
    n += batch
  }
  return { best, bestCpu }
}

const fmt = (us) => `${us.toFixed(2).padStart(8)} µs/cycle  ${Math.round(1e6 / us).toLocaleString('en').padStart(9)} cycles/s`

const rows = []
const report = (name, result) => {
  rows.push([name, result.best])
  console.log(`${name.padEnd(58)} ${fmt(result.best)}  (cpu ${result.bestCpu.toFixed(2)} µs)`)
}

console.log(`rota bench — Node ${process.version}${quick ? ' (quick)' : ''}\n`)
console.log('lease + release, one at a time (best round):')
for (const executors of [4, 1024]) {
  // The raw class, objects in and out: the defaults (an info event per grant), then
  // with `minEventLevel: 'warn'` (no event per grant or release).
  for (const [variant, options] of [
    ['', { canProbe: false }],
    [", minEventLevel 'warn'", { canProbe: false, minEventLevel: 'warn' }],
  ]) {
    const policy = new Policy(roster(executors), options)
    report(
      `  raw Policy.handle, ${executors} executors${variant}`,
      measureSync((i) => {
        const { outputs } = policy.handle({ type: 'lease', now: NOW, id: `r${i}`, role: 'coder' })
        policy.handle({ type: 'release', now: NOW, lease: outputs[0].lease })
      }),
    )
    policy.free()
  }
  // The raw class, JSON text in and out (the cross-host step).
  {
    const policy = new Policy(roster(executors), { canProbe: false })
    report(
      `  raw Policy.handleJson, ${executors} executors`,
      measureSync((i) => {
        const step = JSON.parse(policy.handleJson(`{"type":"lease","now":${NOW},"id":"r${i}","role":"coder"}`))
        policy.handleJson(`{"type":"release","now":${NOW},"lease":${step.outputs[0].lease}}`)
      }),
    )
    policy.free()
  }
  // The driver: a Promise per lease.
  {
    const r = await Roster.create({ document: roster(executors), probe: false })
    report(
      `  Roster lease()+release(), ${executors} executors`,
      await measure(async () => {
        const lease = await r.lease('coder')
        lease.release()
      }),
    )
    report(
      `  Roster tryLease()+release(), ${executors} executors`,
      await measure(async () => {
        ;(await r.tryLease('coder')).release()
      }),
    )
    await r.close()
  }
}

console.log('\ncontended: workers loop lease → release, 1 slot per executor (cost must not grow with waiters):')
for (const [executors, workers] of [
  [4, 64],
  [4, 1024],
  [1024, 64],
  [1024, 4096],
]) {
  const r = await Roster.create({ document: roster(executors, 1), probe: false })
  const durationMs = quick ? 300 : 1_500
  let cycles = 0
  const end = performance.now() + durationMs
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < end) {
        const lease = await r.lease('coder')
        await null
        lease.release()
        cycles += 1
      }
    }),
  )
  const us = ((performance.now() - t0) * 1_000) / cycles
  rows.push([`contended ${executors}/${workers}`, us])
  console.log(`${`  Roster, ${executors} executors, ${workers} workers`.padEnd(58)} ${fmt(us)}`)
  await r.close()
}

// The two builds of the module: pkg/node (what the Node entry loads, and so what the
// figures above measured: made for speed) and pkg/web (the browser entry's: made for
// download size, which the budget is about).
let gz = 0
for (const [build, what] of [
  ['node', 'the Node entry'],
  ['web', 'the browser entry; the budget'],
]) {
  console.log(`\nthe WebAssembly module of ${what} (npm/pkg/${build}/rota_wasm_bg.wasm):`)
  const wasm = readFileSync(new URL(`../pkg/${build}/rota_wasm_bg.wasm`, import.meta.url))
  const size = gzipSync(wasm, { level: 9 }).length
  if (build === 'web') gz = size
  console.log(`  raw ${wasm.length.toLocaleString('en')} bytes, gzipped ${size.toLocaleString('en')} bytes`)
  const sections = customSections(wasm)
  if (sections.some((s) => s.name === 'name')) {
    const stripped = stripCustom(wasm)
    const strippedGz = gzipSync(stripped, { level: 9 }).length
    console.log(
      `  of which custom sections ${sections.map((s) => `${s.name} ${s.size.toLocaleString('en')}`).join(', ')};` +
        ` without them: raw ${stripped.length.toLocaleString('en')}, gzipped ${strippedGz.toLocaleString('en')} bytes`,
    )
  }
}
console.log('\nraw class target (< 3 µs per lease+release cycle):')
for (const executors of [4, 1024]) {
  for (const variant of ['', ", minEventLevel 'warn'"]) {
    const [name, us] = rows.find(([n]) => n === `  raw Policy.handle, ${executors} executors${variant}`)
    console.log(`  ${name.trim().padEnd(56)} ${us < 3 ? 'met' : 'NOT met'} (${us.toFixed(2)} µs)`)
  }
}
const gzOk = gz <= 175_000
console.log(`size budget of the web build (<= 175,000 bytes gzipped; also test/size.test.mjs): ${gzOk ? 'met' : 'NOT met'} (${gz.toLocaleString('en')} bytes)`)

/** The custom sections of a wasm module: name and size. */
function customSections(bytes) {
  const found = []
  walk(bytes, (id, start, end, nameEnd, name) => {
    if (id === 0) found.push({ name, size: end - start })
  })
  return found
}

/** The module without its custom sections (what wasm-bindgen --remove-name-section gives). */
function stripCustom(bytes) {
  const parts = [bytes.subarray(0, 8)]
  walk(bytes, (id, start, end, _nameEnd, _name, headerStart) => {
    if (id !== 0) parts.push(bytes.subarray(headerStart, end))
  })
  return Buffer.concat(parts)
}

function walk(bytes, visit) {
  let i = 8
  const leb = () => {
    let result = 0
    let shift = 0
    for (;;) {
      const b = bytes[i++]
      result += (b & 0x7f) * 2 ** shift
      shift += 7
      if (b < 0x80) return result
    }
  }
  while (i < bytes.length) {
    const headerStart = i
    const id = bytes[i++]
    const size = leb()
    const start = i
    let name
    let nameEnd
    if (id === 0) {
      const length = leb()
      name = new TextDecoder().decode(bytes.subarray(i, i + length))
      nameEnd = i + length
    }
    visit(id, start, start + size, nameEnd, name, headerStart)
    i = start + size
  }
}
