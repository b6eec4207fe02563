// The visualizer's logic without a browser: the JSON place finder, trace reading, and
// replay (verification, seeking through checkpoints), over the package's Node entry.

import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import * as rota from '../../src/node.js'
import { parseWithPlaces, placeOf, JsonSyntaxError } from '../lib/jsonpos.js'
import { parseTrace, normalizeTrace, jsonEqual, TraceError } from '../lib/trace.js'
import { Replay } from '../lib/replay.js'
import { Session, EPOCH } from '../lib/session.js'
import { buildTrace, EXAMPLE } from './scenario.mjs'

describe('jsonpos', () => {
  const text = '{\n  "executors": [\n    { "id": "a", "cooldown": { "outage": "soon" } },\n    { "id": "b" }\n  ]\n}'

  test('parses like JSON.parse and places every path', () => {
    const { value, places } = parseWithPlaces(text)
    assert.deepEqual(value, JSON.parse(text))
    const at = (path) => text.slice(places.get(path).start, places.get(path).end)
    assert.equal(at('executors[0].cooldown.outage'), '"soon"')
    assert.equal(at('executors[1].id'), '"b"')
    assert.equal(text.slice(places.get('executors[0].id').keyStart).slice(0, 4), '"id"')
  })

  test('a missing field points at the object that lacks it', () => {
    const { places } = parseWithPlaces(text)
    const place = placeOf(places, 'executors[1].harness')
    assert.equal(place.path, 'executors[1]')
    assert.equal(place.exact, false)
    assert.equal(placeOf(places, 'executors[0].id').exact, true)
  })

  test('syntax errors carry line and column', () => {
    assert.throws(() => parseWithPlaces('{\n  "a": 1,\n}'), (e) => e instanceof JsonSyntaxError && e.line === 3 && e.column === 1)
    assert.throws(() => parseWithPlaces('[1, 2'), JsonSyntaxError)
    assert.throws(() => parseWithPlaces('{"a": 1} x'), JsonSyntaxError)
    assert.deepEqual(parseWithPlaces('"\\u00e9\\n"').value, 'é\n')
    assert.deepEqual(parseWithPlaces('[-1.5e3, true, null, {}]').value, [-1500, true, null, {}])
  })
})

describe('trace files', () => {
  const input = { type: 'lease', now: EPOCH, id: 'r1', role: 'coder' }

  test('the standard shape, and its variants', () => {
    const standard = parseTrace(JSON.stringify({ document: EXAMPLE, options: null, steps: [{ input, outputs: [], wakeAt: null }] }))
    assert.deepEqual(standard.steps, [{ input, outputs: [], wakeAt: null }])
    // outputs as a host call's drained result
    const drained = normalizeTrace({ document: EXAMPLE, steps: [{ input, outputs: { outputs: [], wakeAt: 5 } }] })
    assert.deepEqual(drained.steps, [{ input, outputs: [], wakeAt: 5 }])
    // bare inputs, under `inputs`
    const bare = normalizeTrace({ document: EXAMPLE, inputs: [input] })
    assert.deepEqual(bare.steps, [{ input }])
    // JSON Lines: a header, then steps
    const lines = [JSON.stringify({ document: EXAMPLE, options: { canProbe: false } }), JSON.stringify({ input, outputs: [] })].join('\n')
    const jsonl = parseTrace(lines)
    assert.deepEqual(jsonl.options, { canProbe: false })
    assert.equal(jsonl.steps.length, 1)
    // a rejected input
    const rejected = normalizeTrace({ document: EXAMPLE, steps: [{ input, error: { code: 'UNKNOWN_ROLE', message: 'x' } }] })
    assert.equal(rejected.steps[0].error.code, 'UNKNOWN_ROLE')
  })

  test('what is wrong is said', () => {
    assert.throws(() => parseTrace('nope'), TraceError)
    assert.throws(() => normalizeTrace({ steps: [] }), /no `document`/)
    assert.throws(() => normalizeTrace({ document: EXAMPLE }), /no `steps`/)
    assert.throws(() => normalizeTrace({ document: EXAMPLE, steps: [{ outputs: [] }] }), /no `input`/)
    assert.throws(() => normalizeTrace({ document: EXAMPLE, steps: [{ input: [1] }] }), /not an object/)
  })

  test('jsonEqual ignores key order only', () => {
    assert.ok(jsonEqual({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 }))
    assert.ok(!jsonEqual({ a: 1 }, { a: 1, b: 2 }))
    assert.ok(!jsonEqual([1, 2], [2, 1]))
  })
})

describe('replay', () => {
  test('a rejected input replays as the same error', () => {
    const trace = normalizeTrace({
      document: EXAMPLE,
      steps: [
        { input: { type: 'tick' }, error: { code: 'INVALID_INPUT', message: '…' } },
        { input: { type: 'lease', now: EPOCH, id: 'r1', role: 'astronaut' }, error: { code: 'UNKNOWN_ROLE', message: '…' } },
      ],
    })
    const replay = new Replay(rota.Policy, trace)
    assert.deepEqual(replay.mismatches, [])
    assert.deepEqual(replay.results.map((r) => r.error.code), ['INVALID_INPUT', 'UNKNOWN_ROLE'])
    assert.equal(replay.nowAt(0), EPOCH)
  })

  const vectors = new URL('../../../tests/vectors/', import.meta.url)
  test('the conformance vectors open as traces and replay with their expected answers', { skip: !existsSync(vectors) && 'no tests/vectors' }, () => {
    let replayed = 0
    for (const name of readdirSync(vectors).filter((f) => f.endsWith('.json'))) {
      const vector = JSON.parse(readFileSync(new URL(name, vectors), 'utf8'))
      if (vector.create?.error) continue // a document the core refuses: nothing to replay
      const trace = normalizeTrace(vector)
      const replay = new Replay(rota.Policy, trace)
      assert.deepEqual(replay.mismatches.map((m) => m.step), [], name)
      replayed++
    }
    assert.ok(replayed > 0)
  })

  test('a recorded run replays with identical outputs', () => {
    const { trace, finalSnapshot } = buildTrace(rota)
    const replay = new Replay(rota.Policy, parseTrace(JSON.stringify(trace)))
    assert.deepEqual(replay.mismatches, [])
    assert.equal(replay.unverified, 0)
    assert.deepEqual(replay.finalSnapshot, finalSnapshot)
    assert.deepEqual(replay.executorIds, ['claude-opus', 'codex', 'local-qwen', 'pi-gemini', 'ci-worker', 'sonnet-review'])
    assert.equal(replay.timeline.length, trace.steps.length + 1)
    assert.equal(replay.nowAt(0), trace.steps[0].input.now, 'the timeline starts at the first input')
  })

  test('seeking anywhere, in any order, gives the state of a run of that prefix', () => {
    const { trace } = buildTrace(rota)
    const parsed = parseTrace(JSON.stringify(trace))
    const replay = new Replay(rota.Policy, parsed, { checkpointEvery: 4 })
    const prefixState = (p) => new Replay(rota.Policy, { ...parsed, steps: parsed.steps.slice(0, p) }).finalSnapshot
    for (const p of [0, 7, 3, 3, 30, 12, 13, 1, replay.length, 9]) {
      assert.deepEqual(replay.seek(p).snapshot(), p === 0 ? new rota.Policy(parsed.document).snapshot() : prefixState(p), `position ${p}`)
      assert.equal(replay.position, p)
    }
  })

  test('a divergence is found at its step', () => {
    const { trace } = buildTrace(rota)
    const bad = structuredClone(trace)
    bad.steps[3].outputs = []
    bad.steps[5].wakeAt = 42
    const replay = new Replay(rota.Policy, normalizeTrace(bad))
    assert.deepEqual(replay.mismatches.map((m) => m.step), [3, 5])
  })

  test('positionAt finds the first position at or after a time', () => {
    const { trace } = buildTrace(rota)
    const replay = new Replay(rota.Policy, parseTrace(JSON.stringify(trace)))
    assert.equal(replay.positionAt(0), 0)
    assert.equal(replay.positionAt(Number.MAX_SAFE_INTEGER), replay.length + 1)
    const p = replay.positionAt(EPOCH + 1)
    assert.ok(replay.nowAt(p) >= EPOCH + 1 && replay.nowAt(p - 1) < EPOCH + 1)
  })

  test('a session continued from a replay position records on from there', () => {
    const { trace } = buildTrace(rota)
    const replay = new Replay(rota.Policy, parseTrace(JSON.stringify(trace)))
    replay.seek(10)
    const policy = rota.Policy.importState(replay.policy.exportState())
    const s = new Session(rota.Policy, trace.document, null, { policy, steps: replay.stepsUpTo(10), now: replay.nowAt(10) })
    s.advance(1000)
    const again = new Replay(rota.Policy, normalizeTrace(s.trace()))
    assert.equal(again.length, 11)
    assert.deepEqual(again.mismatches, [])
  })
})
