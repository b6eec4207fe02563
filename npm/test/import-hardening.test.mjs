// No call of any export traps the module (issue 12): a contradictory exported state is
// refused with INVALID_STATE naming what broke, 1,000 times in one process, and a healthy
// Policy beside them keeps working with wasm memory inside a bound. Before the fix each
// trap leaked memory (2,000 traps: 1.4 -> 49.1 MiB) and ~100 traps broke every Policy.

import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { Policy, RotaError } from 'rota'
import { START, document, executor } from './helpers.mjs'

// The installed package's own glue module (the one `rota` loaded: same URL, same
// instance), for its memory size; not part of the public API.
const packageRoot = dirname(createRequire(import.meta.url).resolve('rota/package.json'))
const glue = await import(pathToFileURL(join(packageRoot, 'pkg', 'node', 'rota_wasm.js')).href)
const memoryBytes = () => glue.__memory().buffer.byteLength

const roster = document(
  executor('a', { roles: ['coder'], slots: 2 }),
  executor('b', { roles: ['coder', 'reviewer'] }),
)

/** A real export with leases and waiters, as a plain object. The policy is freed:
 * 1,000 live ones would grow the module's memory by themselves (~12 KiB each). */
function realExport() {
  const policy = new Policy(roster)
  try {
    for (let i = 1; i <= 5; i++) policy.handle({ type: 'lease', now: START, id: `r${i}`, role: 'coder' })
    const state = policy.exportState()
    return typeof state === 'string' ? JSON.parse(state) : structuredClone(state)
  } finally {
    policy.free()
  }
}

// Each edit keeps the shape valid but makes the parts contradict one another.
const contradictions = [
  ['nextLease at or below a live lease id', (s) => { s.nextLease = 1 }],
  ['a lease on an executor the document lacks', (s) => { leasesOf(s)[0].executor = 'ghost' }],
  ['every lease removed while requests still wait', (s) => { clearLeases(s) }],
  ['a lease duplicated', (s) => { duplicateLease(s) }],
]

function leasesOf(state) {
  const leases = state.leases
  if (Array.isArray(leases)) return leases.map((l) => (Array.isArray(l) ? l[1] : l))
  return Object.values(leases)
}
function clearLeases(state) {
  state.leases = Array.isArray(state.leases) ? [] : {}
}
function duplicateLease(state) {
  if (Array.isArray(state.leases)) {
    const first = state.leases[0]
    state.leases.push(Array.isArray(first) ? [first[0] + 1000, first[1]] : { ...first, id: (first.id ?? 0) + 1000 })
  } else {
    const [id, lease] = Object.entries(state.leases)[0]
    state.leases[String(Number(id) + 1000)] = lease
  }
}

test('contradictory exports are refused with INVALID_STATE, never a trap, and memory stays bounded', () => {
  const healthy = new Policy(roster)
  healthy.handle({ type: 'lease', now: START, id: 'h1', role: 'coder' })
  const before = memoryBytes()
  let refused = 0
  for (let i = 0; i < 1_000; i++) {
    const [what, edit] = contradictions[i % contradictions.length]
    const state = realExport()
    edit(state)
    let error
    try {
      Policy.importState(state)
    } catch (e) {
      error = e
    }
    assert.ok(error instanceof RotaError, `${what}: threw ${error?.name}: ${error?.message} (want a RotaError)`)
    assert.equal(error.code, 'INVALID_STATE', `${what}: ${error.message}`)
    refused++
  }
  assert.equal(refused, 1_000)
  // The healthy policy still decides, and nothing leaked per refusal.
  const answer = healthy.handle({ type: 'lease', now: START + 1, id: 'h2', role: 'coder' })
  assert.ok(answer.outputs.some((o) => o.type === 'granted'), 'the healthy policy still grants')
  const grown = memoryBytes() - before
  console.log(`wasm memory: ${before} -> ${memoryBytes()} bytes over 1,000 refused imports`)
  assert.ok(grown <= 4 * 1024 * 1024, `wasm memory grew by ${grown} bytes over 1,000 refused imports`)
})
