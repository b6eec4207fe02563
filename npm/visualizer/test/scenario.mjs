// A small recorded run, made in Node with the package's Node entry (the same core the
// page runs): leases until a queue forms, a machine that fails, rate limits, an
// outage with probes, a reload that drains an executor, time passing. Returns the
// trace (the format the visualizer replays) and the policy's final snapshot.

import { readFileSync } from 'node:fs'
import { Session } from '../lib/session.js'

export const EXAMPLE = JSON.parse(readFileSync(new URL('../example-roster.json', import.meta.url), 'utf8'))
export const OVERLAY = JSON.parse(readFileSync(new URL('../example-overlay.json', import.meta.url), 'utf8'))

export function buildTrace(rota) {
  const s = new Session(rota, EXAMPLE, null)
  for (let i = 0; i < 6; i++) s.lease({ role: 'coder', label: `task-${i + 1}` })
  s.advance(5_000)
  s.lease({ role: 'verifier', rank: 1 }) // ci-worker provisions a machine
  s.advance(20_000)
  s.machineFailed('r7') // pause machine creation on ci-worker; r7 waits again
  s.lease({ role: 'planner', rank: 0, label: 'plan' })
  for (let i = 0; i < 3; i++) {
    s.advance(1_000)
    s.report('codex', 'rateLimit')
  }
  s.report('local-qwen', 'outage')
  s.probeResult('local-qwen', false)
  s.advance(15_000)
  s.release(1)
  s.advance(45_000)
  s.reload(rota.merge(EXAMPLE, OVERLAY)) // pi-gemini leaves (drains if busy), sonnet-review added
  s.lease({ role: 'reviewer', label: 'review' })
  s.advance(60_000)
  s.toWake()
  s.report('claude-opus', 'usageLimit', { retryAfterMs: 20 * 60_000 })
  s.advance(10 * 60_000)
  s.toWake()
  for (let i = 0; i < 3; i++) s.lease({ role: 'coder', label: `late-${i + 1}` }) // a queue at the end
  s.lease({ role: 'judge', pin: 'pi-gemini', label: 'reattached' }) // pinned to a draining executor: waits
  s.advance(2_000)
  return { trace: s.trace(), finalSnapshot: s.snapshot(), session: s }
}
