// The visualizer's logic without a browser: the JSON place finder, trace reading, and
// replay (verification, seeking through checkpoints), over the package's Node entry.

import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import * as rota from '../../src/node.js'
import { parseWithPlaces, placeOf, JsonSyntaxError } from '../lib/jsonpos.js'
import { parseTrace, parseTraceInSlices, normalizeTrace, jsonEqual, TraceError } from '../lib/trace.js'
import { Replay } from '../lib/replay.js'
import { Session, EPOCH } from '../lib/session.js'
import { StateFile, stateFileOf, entryPieces } from '../lib/statefile.js'
import { redactDocumentText } from '../lib/redact.js'
import { describeEffect, describeInput, shownLabel } from '../lib/format.js'
import { axisTicks, offsetLabel } from '../lib/chart.js'
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
    const replay = new Replay(rota, trace)
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
      const replay = new Replay(rota, trace)
      assert.deepEqual(replay.mismatches.map((m) => m.step), [], name)
      replayed++
    }
    assert.ok(replayed > 0)
  })

  test('a recorded run replays with identical outputs', () => {
    const { trace, finalSnapshot } = buildTrace(rota)
    const replay = new Replay(rota, parseTrace(JSON.stringify(trace)))
    assert.deepEqual(replay.mismatches, [])
    assert.equal(replay.unverified, 0)
    assert.deepEqual(replay.finalSnapshot, finalSnapshot)
    assert.deepEqual(replay.executorIds, ['claude-opus', 'codex', 'local-qwen', 'pi-gemini', 'ci-worker', 'sonnet-review'])
    assert.equal(replay.timeline.length, trace.steps.length + 1, 'a short trace: a sample at every position')
    assert.deepEqual(replay.timeline.map((t) => t.position), replay.times.map((_, p) => p))
    assert.equal(replay.nowAt(0), trace.steps[0].input.now, 'the timeline starts at the first input')
  })

  test('seeking anywhere, in any order, gives the state of a run of that prefix', () => {
    const { trace } = buildTrace(rota)
    const parsed = parseTrace(JSON.stringify(trace))
    const replay = new Replay(rota, parsed, { checkpointEvery: 4 })
    const prefixState = (p) => new Replay(rota, { ...parsed, steps: parsed.steps.slice(0, p) }).finalSnapshot
    for (const p of [0, 7, 3, 3, 30, 12, 13, 1, replay.length, 9]) {
      assert.deepEqual(replay.seek(p).snapshot(), p === 0 ? new rota.Policy(parsed.document).snapshot() : prefixState(p), `position ${p}`)
      assert.equal(replay.position, p)
    }
  })

  test('a long trace samples the board on a grid and at every band change: the same bands', () => {
    const { trace } = buildTrace(rota)
    const parsed = parseTrace(JSON.stringify(trace))
    const every = new Replay(rota, parsed)
    const sparse = new Replay(rota, parsed, { sampleEvery: 7 })
    assert.ok(sparse.timeline.length < every.timeline.length / 2, `${sparse.timeline.length} samples of ${every.timeline.length}`)
    assert.deepEqual(sparse.times, every.times)
    // Where each executor's exclusion, pause or draining changes, and to what.
    const changes = (replay) => {
      const out = []
      let last = {}
      for (const sample of replay.timeline) {
        for (const [id, lane] of Object.entries(sample.lanes)) {
          const key = `${lane.exclusion}|${lane.paused}|${lane.draining}|${lane.slots}`
          if (last[id] !== key) out.push(`${sample.position} ${id} ${key}`)
        }
        last = Object.fromEntries(Object.entries(sample.lanes).map(([id, l]) => [id, `${l.exclusion}|${l.paused}|${l.draining}|${l.slots}`]))
      }
      return out
    }
    assert.deepEqual(changes(sparse), changes(every))
    // every sample is the board at its position
    for (const sample of sparse.timeline) assert.deepEqual(sample, every.timeline[sample.position])
  })

  test('a divergence is found at its step', () => {
    const { trace } = buildTrace(rota)
    const bad = structuredClone(trace)
    bad.steps[3].outputs = []
    bad.steps[5].wakeAt = 42
    const replay = new Replay(rota, normalizeTrace(bad))
    assert.deepEqual(replay.mismatches.map((m) => m.step), [3, 5])
  })

  test('positionAt finds the first position at or after a time', () => {
    const { trace } = buildTrace(rota)
    const replay = new Replay(rota, parseTrace(JSON.stringify(trace)))
    assert.equal(replay.positionAt(0), 0)
    assert.equal(replay.positionAt(Number.MAX_SAFE_INTEGER), replay.length + 1)
    const p = replay.positionAt(EPOCH + 1)
    assert.ok(replay.nowAt(p) >= EPOCH + 1 && replay.nowAt(p - 1) < EPOCH + 1)
  })

  test('a session continued from a replay position records on from there', () => {
    const { trace } = buildTrace(rota)
    const replay = new Replay(rota, parseTrace(JSON.stringify(trace)))
    replay.seek(10)
    const policy = rota.Policy.importState(replay.policy.exportState())
    const s = new Session(rota, trace.document, null, { policy, steps: replay.stepsUpTo(10), now: replay.nowAt(10) })
    s.advance(1000)
    const again = new Replay(rota, normalizeTrace(s.trace()))
    assert.equal(again.length, 11)
    assert.deepEqual(again.mismatches, [])
  })
})

describe('long traces parse in slices', () => {
  const immediate = () => Promise.resolve()

  test('the same trace as parseTrace, whatever the slice size, with progress to the end', async () => {
    const { trace } = buildTrace(rota)
    for (const text of [JSON.stringify(trace), JSON.stringify(trace, null, 1), JSON.stringify({ ...trace, steps: [] })]) {
      for (const sliceChars of [1, 200, 1 << 20]) {
        const shares = []
        const sliced = await parseTraceInSlices(text, { sliceChars, yieldFn: immediate, onProgress: (x) => shares.push(x) })
        assert.deepEqual(sliced, parseTrace(text), `slices of ${sliceChars}`)
        assert.deepEqual(shares, [...shares].sort((a, b) => a - b), 'progress only grows')
        assert.ok(shares.every((x) => x >= 0 && x <= 1))
      }
    }
  })

  test('strings with brackets, commas and escapes inside steps cut nowhere wrong', async () => {
    const input = { type: 'lease', now: EPOCH, id: 'r,1]"\\', role: 'coder', label: '}{ ,[ "steps": [' }
    const text = JSON.stringify({ document: EXAMPLE, steps: [{ input }, { input: { ...input, id: 'r2' } }], note: { steps: [1, 2] } })
    assert.deepEqual(await parseTraceInSlices(text, { sliceChars: 1, yieldFn: immediate }), parseTrace(text))
  })

  test('JSON Lines, the variants and bad text go to parseTrace (and its errors)', async () => {
    const input = { type: 'tick', now: EPOCH }
    const lines = [JSON.stringify({ document: EXAMPLE }), JSON.stringify({ input })].join('\n')
    assert.deepEqual(await parseTraceInSlices(lines, { yieldFn: immediate }), parseTrace(lines))
    const bare = JSON.stringify({ document: EXAMPLE, inputs: [input] })
    assert.deepEqual(await parseTraceInSlices(bare, { yieldFn: immediate }), parseTrace(bare))
    await assert.rejects(parseTraceInSlices('{"document": {}, "steps": [ {"input": } ]}', { yieldFn: immediate }), TraceError)
    await assert.rejects(parseTraceInSlices('nope', { yieldFn: immediate }), TraceError)
  })
})

describe('the state file', () => {
  const persist = (ids, exclusions) => ({ type: 'persist', ids, state: { version: 1, exclusions } })
  // In the seed's field order (the file's text is compared byte for byte).
  const a = { id: 'a', reason: 'rate limits', kind: 'until', until: EPOCH + 600_000 }
  const b = { id: 'b', reason: 'paused', kind: 'manual' }
  const ids = (file) => file.exclusions().map((e) => e.id)

  test("folds persists by the core's rule: each replaces its ids and keeps the others; the text is the seed's file", () => {
    const file = new StateFile(rota.stateFile)
    assert.equal(file.text, null)
    file.applyStep({ input: { type: 'report', now: EPOCH }, outputs: [persist(['a'], [a])] }, 0)
    file.applyStep({ input: { type: 'exclude', now: EPOCH }, outputs: [persist(['b'], [b])] }, 1)
    assert.deepEqual(file.exclusions(), [a, b])
    assert.deepEqual(file.entries.map((e) => e.step), [0, 1], 'which step wrote each entry')
    // What a host writes: @llm4ts/flow's saveVersioned envelope, byte for byte.
    assert.equal(file.text, `${JSON.stringify({ schemaVersion: 1, value: { exclusions: [a, b] } }, undefined, 2)}\n`)
    file.applyStep({ input: { type: 'tick', now: EPOCH + 1 }, outputs: [persist(['a'], [])] }, 2)
    assert.deepEqual(ids(file), ['b'], 'a removed, b kept')
    assert.deepEqual(file.last, { step: 2, now: EPOCH + 1, ids: ['a'], written: [], removed: ['a'] })
    file.applyStep({ input: { type: 'report', now: EPOCH + 2 }, outputs: [persist(['a'], [a])] }, 3)
    assert.deepEqual(ids(file), ['b', 'a'], 'written again: last in the file')
    assert.deepEqual(file.last.written, ['a'])
    assert.equal(file.persists, 4)
  })

  test('an entry whose time has passed leaves the file at the next write, as a host writes it', () => {
    const file = new StateFile(rota.stateFile)
    file.applyStep({ input: { type: 'report', now: EPOCH }, outputs: [persist(['a'], [a])] }, 0)
    file.applyStep({ input: { type: 'exclude', now: a.until }, outputs: [persist(['b'], [b])] }, 1)
    assert.deepEqual(ids(file), ['b'])
  })

  test('a restore is the file read at start (never a run entry); a rejected step writes nothing', () => {
    const file = stateFileOf(rota.stateFile, [
      { input: { type: 'restore', now: EPOCH, state: { version: 1, exclusions: [a, { ...b, kind: 'run' }] } }, outputs: [] },
      { input: { type: 'exclude', now: EPOCH }, error: { code: 'UNKNOWN_EXECUTOR' }, outputs: [persist(['b'], [b])] },
    ])
    assert.deepEqual(file.exclusions(), [a])
    assert.equal(file.persists, 0)
  })

  test("the display's pieces are the text, with each entry's lines marked", () => {
    const file = stateFileOf(rota.stateFile, [
      { input: { type: 'report', now: EPOCH }, outputs: [persist(['a', 'b'], [a, b])] },
    ])
    const pieces = entryPieces(file.text, file.entries)
    assert.equal(pieces.map((p) => p.text).join(''), file.text)
    const marked = pieces.filter((p) => p.entry)
    assert.deepEqual(marked.map((p) => p.entry.entry.id), ['a', 'b'])
    for (const p of marked) assert.deepEqual(JSON.parse(p.text), p.entry.entry)
    assert.equal(entryPieces(file.text, file.entries.slice(1)), null, 'pieces that do not match the entries')
  })

  test("equals the core's lasting exclusions at every step of a recorded run, in a session and in a replay", () => {
    const { trace, session } = buildTrace(rota)
    const replay = new Replay(rota, parseTrace(JSON.stringify(trace)))
    const lasting = (snapshot) =>
      snapshot.executors
        .filter((e) => e.exclusion && e.exclusion.kind !== 'run' && !e.draining)
        .map((e) => e.id)
        .sort()
    assert.ok(replay.fileSteps.length >= 3)
    for (const p of [replay.length, 0, 5, 12, replay.length - 3, 20, 21]) {
      const shown = ids(replay.stateFileAt(p)).sort()
      assert.deepEqual(shown, lasting(replay.seek(p).snapshot()), `position ${p}`)
    }
    assert.equal(session.stateFile.text, replay.stateFileAt(replay.length).text)
  })

  test('a replay seeks back through copies of the file: the same file as folding from the start', () => {
    const session = new Session(rota, EXAMPLE, null)
    session.exclude('claude-opus', { reason: 'kept all along' })
    for (let i = 0; i < 80; i++) {
      session.exclude('codex', { reason: `pause ${i}` })
      session.advance(1_000)
      session.resume('codex')
    }
    const replay = new Replay(rota, normalizeTrace(session.trace()))
    assert.ok(replay.fileSteps.length > 128, `${replay.fileSteps.length} file steps`)
    for (const p of [replay.length, 10, replay.length - 1, 200, 3, replay.length]) {
      const fresh = stateFileOf(rota.stateFile, session.steps, p)
      const seeked = replay.stateFileAt(p)
      assert.equal(seeked.text, fresh.text, `position ${p}`)
      assert.deepEqual(seeked.last, fresh.last, `position ${p}`)
      assert.equal(seeked.persists, fresh.persists, `position ${p}`)
    }
    assert.ok(replay.fileCheckpoints.length >= 2)
  })
})

describe('redaction', () => {
  const text = [
    '{',
    '  "executors": [',
    '    { "id": "a", "harness": "pi", "roles": ["coder"],',
    '      "env": { "API_KEY": "sk-ant-api03-secretsecret", "TOKEN": "${TOKEN}", "LOG": "debug" } }',
    '  ]',
    '}',
  ].join('\n')

  test("the editor's text: only the values the core redacts change, the rest reads as written", () => {
    const { text: out, redacted } = redactDocumentText(text, rota.redact)
    assert.equal(redacted, 2)
    assert.ok(!out.includes('secretsecret') && !out.includes('debug'), out)
    assert.equal(out, text.replace('"sk-ant-api03-secretsecret"', '"[redacted]"').replace('"debug"', '"[redacted]"'))
    assert.deepEqual(JSON.parse(out), rota.redact(JSON.parse(text)))
    // Nothing to redact, or not JSON yet: the text as it is.
    assert.deepEqual(redactDocumentText(out, rota.redact), { text: out, redacted: 0 })
    assert.deepEqual(redactDocumentText('{ "executors": [', rota.redact), { text: '{ "executors": [', redacted: 0 })
  })

  test('a key written twice: the whole document is written again, no literal left', () => {
    const twice = '{"executors": [{"id": "a", "harness": "pi", "roles": ["coder"], "env": {"K": "first-secret", "K": "${K}"}}]}'
    const { text: out } = redactDocumentText(twice.replace('"${K}"', '"second"'), rota.redact)
    assert.ok(!out.includes('first-secret') && !out.includes('second'), out)
    assert.deepEqual(JSON.parse(out).executors[0].env, { K: '[redacted]' })
  })
})

describe('words', () => {
  test('a persist says what it wrote and what it removed', () => {
    const output = {
      type: 'persist',
      ids: ['a', 'b', 'c', 'd'],
      state: { version: 1, exclusions: [{ id: 'b', kind: 'until', reason: 'x', until: EPOCH + 90_000 }, { id: 'c', kind: 'manual', reason: 'x', until: null }, { id: 'd', kind: 'health', reason: 'x', until: null }] },
    }
    assert.equal(describeEffect(output), 'host: persist: a back in the round; b excluded until 00:01:30; c excluded (manual, until resumed); d excluded (health)')
  })

  test('a label shows only when it differs from the id', () => {
    assert.equal(shownLabel('job 605', 'job 605'), null)
    assert.equal(shownLabel('j605', 'job 605'), 'job 605')
    assert.equal(shownLabel('r1', undefined), null)
    assert.equal(describeInput({ type: 'lease', id: 'job 605', role: 'coder', label: 'job 605' }), 'lease job 605 coder')
    assert.equal(describeInput({ type: 'lease', id: 'j605', role: 'coder', label: 'job 605' }), 'lease j605 coder (“job 605”)')
  })
})

describe('chart ticks', () => {
  const LABEL = 120
  const scale = (t0, spanMs, plot) => ({ axis: 'time', plot, t0, end: t0 + spanMs, xt: (t) => LABEL + ((t - t0) / spanMs) * plot })
  const stepScale = (n, plot) => ({ axis: 'step', plot, x: (p) => LABEL + (p / (n + 1)) * plot })
  const apart = (ticks, cw) => ticks.every((t, i) => i === 0 || t.x - ticks[i - 1].x >= ((t.label.length + ticks[i - 1].label.length) / 2) * cw + 6)

  test('round times, as many as fit, never touching, at any width', () => {
    for (const [spanMs, width] of [[200 * 3_600_000, 400], [200 * 3_600_000, 1800], [2 * 3_600_000, 500], [90_000, 700], [30 * 3_600_000, 480]]) {
      const ticks = axisTicks(scale(EPOCH, spanMs, width - LABEL - 12), 0, width, 6.5)
      assert.ok(ticks.length >= 2, `${spanMs} ms over ${width} px: ${ticks.map((t) => t.label)}`)
      assert.ok(apart(ticks, 6.5), `${spanMs} ms over ${width} px: ${ticks.map((t) => `${t.label}@${t.x.toFixed(0)}`)}`)
      assert.ok(ticks.every((t) => t.x - (t.label.length * 6.5) / 2 >= 0 && t.x + (t.label.length * 6.5) / 2 <= width))
    }
    const long = axisTicks(scale(EPOCH, 200 * 3_600_000, 600), 0, 732, 6.5).map((t) => t.label)
    assert.ok(long.every((l) => /^\+(\d+d( \d+h)?|\d+h|0)$/.test(l)), long.join(', '))
  })

  test('round step counts', () => {
    const ticks = axisTicks(stepScale(75_739, 500), 75_739, 632, 6.5)
    assert.ok(apart(ticks, 6.5), ticks.map((t) => t.label).join(', '))
    assert.ok(ticks.slice(1).every((t) => Number(t.label) % 10_000 === 0), ticks.map((t) => t.label).join(', '))
  })

  test('offsets since the start, two units at most', () => {
    assert.equal(offsetLabel(0), '+0')
    assert.equal(offsetLabel(45_000), '+45s')
    assert.equal(offsetLabel(90 * 60_000), '+1h 30m')
    assert.equal(offsetLabel(24 * 3_600_000), '+1d')
    assert.equal(offsetLabel(200 * 3_600_000), '+8d 8h')
  })
})
