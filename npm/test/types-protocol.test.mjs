// The protocol half of types/index.d.ts, checked against the core itself:
//   - each input type's fields are exactly the fields the core's wire table accepts
//     (asked through the core's own "unknown field …, expected one of …" answer), and
//     the input types are the core's;
//   - every output, event and snapshot the core gives while it runs every conformance
//     vector has only declared fields, every required one, and a declared type/name.
// The declarations are read with the TypeScript compiler API (a dev dependency).

import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { test } from 'node:test'
import { Policy } from 'rota'

const root = process.env.ROTA_PACKAGE_ROOT
const vectors = process.env.ROTA_VECTORS
const skip = (root === undefined || vectors === undefined) && 'run through test/run.mjs'

let parsed
/** The declarations' types (parsed once): `variants(name)` of a union by its `type` tag, `fields(name)` of an interface. */
function declarations() {
  parsed ??= parse()
  return parsed
}

function parse() {
  const ts = createRequire(join(root, 'package.json'))('typescript')
  const installed = createRequire(join(process.env.ROTA_TEST_PROJECT, 'package.json'))
  const path = join(installed.resolve('rota/package.json'), '..', 'types', 'index.d.ts')
  const program = ts.createProgram([path], { strict: true, noEmit: true, types: [], lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts', 'lib.dom.d.ts'] })
  const checker = program.getTypeChecker()
  const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(path)))
  const typeOf = (name) => {
    const symbol = exports.find((s) => s.name === name)
    assert.ok(symbol, `types/index.d.ts exports ${name}`)
    return checker.getDeclaredTypeOfSymbol(symbol)
  }
  const propsOf = (type) => {
    const out = new Map()
    for (const p of checker.getPropertiesOfType(type)) out.set(p.name, { optional: (p.flags & ts.SymbolFlags.Optional) !== 0, symbol: p })
    return out
  }
  const literal = (symbol) => checker.getTypeOfSymbol(symbol).value
  return {
    fields: (name) => propsOf(typeOf(name)),
    /** tag → Map(field → { optional }): the union's members merged by their `type`. */
    variants(name, tag = 'type') {
      const type = typeOf(name)
      const out = new Map()
      for (const member of type.isUnion() ? type.types : [type]) {
        const props = propsOf(member)
        const key = literal(props.get(tag).symbol)
        const merged = out.get(key) ?? new Map()
        for (const [field, info] of props) {
          const seen = merged.get(field)
          merged.set(field, { optional: (seen?.optional ?? false) || info.optional })
        }
        out.set(key, merged)
      }
      return out
    },
    /** CoreEventFields: event name → Map(field → { optional }). */
    interfaceOfInterfaces(name) {
      const out = new Map()
      for (const [key, { symbol }] of propsOf(typeOf(name))) out.set(key, propsOf(checker.getTypeOfSymbol(symbol)))
      return out
    },
  }
}

/** The names in the core's "expected one of `a`, `b`" (or "expected `a`") answer. */
function expectedNames(answer) {
  const message = JSON.parse(answer).error?.message ?? ''
  const list = /expected (?:one of )?(.*)$/.exec(message)?.[1]
  assert.ok(list !== undefined, `the core's answer names what it expects: ${answer}`)
  return [...list.matchAll(/`([^`]+)`/g)].map((m) => m[1]).sort()
}

const sorted = (iterable) => [...iterable].sort()

/** Every declared field present or optional, no undeclared one. */
function conforms(value, declared, where) {
  assert.ok(value !== null && typeof value === 'object', `${where}: an object`)
  for (const key of Object.keys(value)) assert.ok(declared.has(key), `${where}: field '${key}' is not declared (${JSON.stringify(value).slice(0, 200)})`)
  for (const [key, { optional }] of declared) {
    if (!optional) assert.ok(key in value, `${where}: required field '${key}' is missing (${JSON.stringify(value).slice(0, 200)})`)
  }
}

test('each input type has exactly the fields the core reads', { skip }, () => {
  const types = declarations()
  const inputs = types.variants('Input')
  const policy = new Policy({ executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] })
  assert.deepEqual(sorted(inputs.keys()), expectedNames(policy.handleJson('{"type":"__none__","now":1}')), 'the input types')
  for (const [type, fields] of inputs) {
    const declared = sorted([...fields.keys()].filter((f) => f !== 'type'))
    const core = expectedNames(policy.handleJson(JSON.stringify({ type, now: 1, __none__: 1 })))
    assert.deepEqual(declared, core, `input '${type}': declared fields vs the core's`)
  }
  policy.free()
})

test('every output, event and snapshot of the conformance vectors matches its declared type', { skip }, () => {
  const types = declarations()
  const outputs = types.variants('Output')
  const events = types.interfaceOfInterfaces('CoreEventFields')
  const shapes = {
    snapshot: types.fields('Snapshot'),
    executor: types.fields('ExecutorStatus'),
    exclusion: types.fields('ExclusionStatus'),
    pause: types.fields('PauseStatus'),
    lease: types.fields('LeaseStatus'),
    preflight: types.fields('PreflightRecord'),
    queued: types.fields('QueuedRequest'),
    creating: types.fields('CreatingRequest'),
    pendingReload: types.fields('PendingReloadStatus'),
    explanation: types.fields('Explanation'),
    executorExplanation: types.fields('ExecutorExplanation'),
  }
  const seenOutputs = new Set()
  const seenEvents = new Set()
  let checked = 0
  for (const name of readdirSync(vectors).filter((f) => f.endsWith('.json')).sort()) {
    const vector = JSON.parse(readFileSync(join(vectors, name), 'utf8'))
    let policy
    try {
      policy = new Policy(vector.document, vector.options ?? {})
    } catch {
      continue // a vector of a refused document
    }
    const checkSnapshot = (where) => {
      const snapshot = policy.snapshot()
      conforms(snapshot, shapes.snapshot, `${where} snapshot`)
      for (const e of snapshot.executors) {
        conforms(e, shapes.executor, `${where} snapshot executor ${e.id}`)
        if (e.exclusion) conforms(e.exclusion, shapes.exclusion, `${where} ${e.id}.exclusion`)
        if (e.pause) conforms(e.pause, shapes.pause, `${where} ${e.id}.pause`)
        if (e.preflight) conforms(e.preflight, shapes.preflight, `${where} ${e.id}.preflight`)
        for (const l of e.leases) conforms(l, shapes.lease, `${where} ${e.id}.leases`)
      }
      for (const q of snapshot.queue) conforms(q, shapes.queued, `${where} queue`)
      for (const c of snapshot.creating) conforms(c, shapes.creating, `${where} creating`)
      if (snapshot.pendingReload) conforms(snapshot.pendingReload, shapes.pendingReload, `${where} pendingReload`)
      for (const role of snapshot.roles) {
        const why = policy.explain({ role })
        conforms(why, shapes.explanation, `${where} explain(${role})`)
        for (const e of why.executors) conforms(e, shapes.executorExplanation, `${where} explain(${role}) ${e.id}`)
      }
    }
    vector.steps.forEach((step, index) => {
      if (step.input === undefined) return
      const where = `${name} step ${index}`
      let answer
      try {
        answer = policy.handle(step.input)
      } catch {
        return // a refused input: nothing to check
      }
      for (const output of answer.outputs) {
        const declared = outputs.get(output.type)
        assert.ok(declared, `${where}: output type '${output.type}' is not declared`)
        seenOutputs.add(output.type)
        conforms(output, declared, `${where} output ${output.type}`)
        if (output.type === 'event') {
          const fields = events.get(output.name)
          assert.ok(fields, `${where}: event '${output.name}' is not in CoreEventFields`)
          seenEvents.add(output.name)
          conforms(output.fields, fields, `${where} event ${output.name}`)
        }
        checked += 1
      }
      checkSnapshot(where)
    })
    policy.free()
  }
  assert.ok(checked > 500, `checked ${checked} outputs`)
  assert.deepEqual(sorted(outputs.keys()).filter((t) => !seenOutputs.has(t)), [], 'every declared output type occurs in the vectors')
  console.log(`checked ${checked} outputs; events seen: ${seenEvents.size} of ${events.size}`)
})
