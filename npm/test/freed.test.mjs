// A call on a freed Policy (after `free()`) answers a coded error (CLOSED) that names
// the call, not wasm-bindgen's bare `Error` (issue 42).

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Policy, RotaError } from 'rota'

const document = { executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }
const T0 = 1_800_000_000_000

test('every call on a freed Policy throws CLOSED naming the call', () => {
  const policy = new Policy(document, undefined)
  policy.free()
  const calls = {
    handle: () => policy.handle({ type: 'tick', now: T0 }),
    handleJson: () => policy.handleJson(`{"type":"tick","now":${T0}}`),
    snapshot: () => policy.snapshot(),
    available: () => policy.available('coder'),
    exportState: () => policy.exportState(),
    stateHash: () => policy.stateHash(),
    now: () => policy.now,
    wakeAt: () => policy.wakeAt,
  }
  for (const [name, call] of Object.entries(calls)) {
    assert.throws(call, (error) => {
      assert.ok(error instanceof RotaError, `${name}: ${error?.constructor?.name} ${error?.message}`)
      assert.equal(error.code, 'CLOSED', name)
      assert.match(error.message, new RegExp(`^Policy#${name === 'handle' ? 'handleJson' : name}: this policy was freed`), name)
      return true
    })
  }
  // Freeing twice stays harmless, and a live policy is unaffected.
  policy.free()
  const live = new Policy(document, undefined)
  assert.equal(live.available('coder'), 1)
  live.free()
})
