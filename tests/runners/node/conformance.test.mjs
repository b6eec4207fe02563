// The Node runner: every vector and every random trace through the npm package as a
// user installs it (`import { Policy } from 'rota'` resolves to the installed tarball's
// Node entry), calling `Policy#handleJson` with each input's JSON text. Started by
// run.mjs, which sets ROTA_VECTORS and ROTA_TRACES.

import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Policy, check, stateFile } from 'rota'
import { PolicyHost, replayTraces, runStateFileVectors, runVectors } from './shared.mjs'

const vectorsDir = process.env.ROTA_VECTORS
const tracesFile = process.env.ROTA_TRACES

function loadVectors() {
  return readdirSync(vectorsDir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(vectorsDir, f), 'utf8')))
}

test('every vector on node (the npm package, handleJson)', () => {
  const vectors = loadVectors()
  assert.ok(vectors.length >= 60, `expected at least 60 vectors, found ${vectors.length}`)
  const host = new PolicyHost(Policy, 'node', { check })
  // The Node module has the shared log's rules (wasm feature `log`): every vector runs.
  assert.ok(host.hasLog, 'the Node build answers Policy.logJson')
  const failures = runVectors(host, vectors)
  assert.deepEqual(host.skipped, [])
  assert.equal(failures.length, 0, `${failures.length} of ${vectors.length} vectors failed on node:\n\n${failures.join('\n\n')}`)
})

test('every state-file vector on node (the npm package, stateFile.json)', () => {
  const dir = join(vectorsDir, 'state-file')
  const vectors = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')))
  assert.ok(vectors.length >= 5, `expected at least 5 state-file vectors, found ${vectors.length}`)
  const failures = runStateFileVectors('node', stateFile.json, vectors)
  assert.equal(failures.length, 0, `${failures.length} state-file cases failed on node:\n\n${failures.join('\n\n')}`)
})

test('random traces on node match native, byte for byte', () => {
  const file = JSON.parse(readFileSync(tracesFile, 'utf8'))
  assert.equal(file.traces.length, file.count)
  const failures = replayTraces(new PolicyHost(Policy, 'node', { check }), file)
  assert.equal(failures.length, 0, `random traces differ between native and node (seed ${file.seed}):\n\n${failures.join('\n\n')}`)
})

// `Policy#handle` (objects; the binary step for the common inputs) must answer as the
// JSON step does: every vector's and every trace's inputs through both, on two policies
// built alike (npm/test/handle-binary.test.mjs has the random and odd inputs).
test('handle answers as JSON.parse(handleJson(...)) on every vector and trace input', () => {
  const viaJson = (policy, input) => {
    const answer = JSON.parse(policy.handleJson(JSON.stringify(input)))
    if (answer.error !== undefined) return { error: { code: answer.error.code, message: answer.error.message } }
    return { answer }
  }
  const viaHandle = (policy, input) => {
    try {
      return { answer: policy.handle(input) }
    } catch (error) {
      return { error: { code: error.code, message: error.message } }
    }
  }
  const runs = [
    ...loadVectors().map((v) => ({ name: `vector ${v.name}`, document: v.document, options: v.options, inputs: v.steps.map((s) => s.input ?? (s.inputText === undefined ? undefined : tryParse(s.inputText))).filter((i) => i !== undefined) })),
    // A trace holds JSON texts: the document, the options, each input (some are not
    // JSON on purpose: not objects, nothing for handle).
    ...JSON.parse(readFileSync(tracesFile, 'utf8')).traces.map((t) => ({ name: `trace seed ${t.seed}`, document: JSON.parse(t.document), options: JSON.parse(t.options), inputs: t.inputs.map(tryParse).filter((i) => i !== undefined) })),
  ]
  let compared = 0
  for (const run of runs) {
    let fast
    try {
      fast = new Policy(run.document, run.options ?? undefined)
    } catch {
      continue
    }
    const slow = new Policy(run.document, run.options ?? undefined)
    for (const [i, input] of run.inputs.entries()) {
      const expected = viaJson(slow, input)
      const actual = viaHandle(fast, input)
      assert.equal(JSON.stringify(actual), JSON.stringify(expected), `${run.name}, input ${i + 1}: ${JSON.stringify(input)}`)
      assert.deepStrictEqual(actual, expected, `${run.name}, input ${i + 1}`)
      compared += 1
    }
    fast.free()
    slow.free()
  }
  assert.ok(compared > 1000, `compared ${compared} inputs`)
})

function tryParse(text) {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
