// The conformance runner for JavaScript hosts (Node and the browser): the same
// contract as the Rust runners (tests/src/host.rs), over the npm package's `Policy`
// class. Inputs go in as JSON text through `handleJson`, which answers with the core's
// own output text, so the comparison is the core's bytes. No Node or DOM API here:
// the callers hand in the vectors, the trace file and the `Policy` class.

/** A value's JSON text with object keys sorted, as serde_json writes a `Value`. */
export function canonical(value) {
  return JSON.stringify(sortKeys(value))
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === 'object') {
    const out = {}
    for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key])
    return out
  }
  return value
}

/** Exact equality of JSON values (numbers by value, keys in any order). */
export function equal(a, b) {
  if (a === b) return true
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]))
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && !Array.isArray(b)) {
    const ka = Object.keys(a)
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]))
  }
  return false
}

/** `actual` has everything `expected` names (arrays: same length, element-wise). */
export function subset(expected, actual) {
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && expected.length === actual.length && expected.every((x, i) => subset(x, actual[i]))
  }
  if (expected !== null && typeof expected === 'object') {
    return actual !== null && typeof actual === 'object' && Object.keys(expected).every((k) => Object.hasOwn(actual, k) && subset(expected[k], actual[k]))
  }
  return equal(expected, actual)
}

/** The snapshot as vectors name it: executors keyed by id. */
export function keyedSnapshot(snapshot) {
  const executors = {}
  for (const x of snapshot.executors ?? []) executors[x.id] = x
  return { ...snapshot, executors }
}

function restrict(expected, actual) {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected) && actual !== null && typeof actual === 'object') {
    const out = {}
    for (const k of Object.keys(expected)) out[k] = Object.hasOwn(actual, k) ? restrict(expected[k], actual[k]) : '<missing>'
    return out
  }
  if (Array.isArray(expected) && Array.isArray(actual) && expected.length === actual.length) {
    return expected.map((x, i) => restrict(x, actual[i]))
  }
  return actual
}

// Keys first in this order when shown (as tests/src/jsonfmt.rs prints them), the
// rest alphabetically.
const KEY_ORDER = ['type', 'now', 'level', 'name', 'id', 'request', 'lease', 'executor', 'executors', 'harness', 'model', 'role', 'roles', 'kind', 'failure', 'reason', 'until', 'slots', 'outputs', 'wakeAt', 'error', 'code', 'message', 'fields']

function readingOrder(value) {
  if (Array.isArray(value)) return value.map(readingOrder)
  if (value !== null && typeof value === 'object') {
    const rank = (k) => (KEY_ORDER.includes(k) ? KEY_ORDER.indexOf(k) : KEY_ORDER.length)
    const keys = Object.keys(value).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0))
    const out = {}
    for (const key of keys) out[key] = readingOrder(value[key])
    return out
  }
  return value
}

/** One line, keys in reading order, a space after `:` and `,` (jsonfmt::inline). */
function shown(value) {
  if (Array.isArray(value)) return `[${value.map(shown).join(', ')}]`
  if (value !== null && typeof value === 'object') {
    const ordered = readingOrder(value)
    return `{${Object.keys(ordered).map((k) => `${JSON.stringify(k)}: ${shown(ordered[k])}`).join(', ')}}`
  }
  return JSON.stringify(value)
}

/** An answer as lines: one output per line, then wakeAt; anything else pretty. */
export function answerLines(answer) {
  if (answer && Array.isArray(answer.outputs) && Object.keys(answer).length === 2 && 'wakeAt' in answer) {
    return ['outputs:', ...answer.outputs.map((o) => '  ' + shown(o)), `wakeAt: ${answer.wakeAt}`].join('\n') + '\n'
  }
  return JSON.stringify(readingOrder(answer), null, 2) + '\n'
}

/** A line diff (`-` expected, `+` actual), two lines of context. */
export function diffLines(expected, actual) {
  const a = expected.split('\n')
  const b = actual.split('\n')
  const lcs = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0))
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1])
    }
  }
  const ops = []
  let i = 0
  let j = 0
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) ops.push([' ', a[i++], j++])
    else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) ops.push(['-', a[i++]])
    else ops.push(['+', b[j++]])
  }
  const near = (k) => ops.slice(Math.max(0, k - 2), k + 3).some((o) => o[0] !== ' ')
  const out = []
  let skipped = false
  ops.forEach((op, k) => {
    if (op[0] === ' ' && !near(k)) {
      if (!skipped) out.push('  ...')
      skipped = true
      return
    }
    skipped = false
    out.push(`${op[0]} ${op[1]}`)
  })
  return out.join('\n')
}

/** A thrown RotaError as the ABI's answer `{"error": {code, message, violations?}}`. */
export function errorAnswer(error) {
  const body = { code: error?.code ?? 'JS_ERROR', message: error?.message ?? String(error) }
  if (error?.violations !== undefined) body.violations = error.violations
  return { error: body }
}

/**
 * A host over the npm package's `Policy` class. `create` returns `null` or the error
 * answer; `step` returns the core's answer text; `query` maps the plain ABI's query
 * shape onto the class's methods and answers `{"ok": value}` or `{"error": ...}`.
 */
export class PolicyHost {
  /** `module`: the package's other exports a query asks (`check`). */
  constructor(Policy, name, module = {}) {
    this.Policy = Policy
    this.name = name
    this.module = module
    this.policy = null
    /** Whether the module has the shared log's rules (the Node build; not the browser's). */
    this.hasLog = typeof Policy.logJson === 'function'
    /** The vectors runVectors left out (asking the shared log's rules of a module without them). */
    this.skipped = []
  }

  create(documentText, optionsText) {
    this.free()
    try {
      this.policy = new this.Policy(JSON.parse(documentText), JSON.parse(optionsText))
      return null
    } catch (error) {
      return errorAnswer(error)
    }
  }

  step(inputText) {
    return this.policy.handleJson(inputText)
  }

  query(query) {
    const p = this.policy
    try {
      const value = (() => {
        switch (query.query) {
          case 'snapshot': return p.snapshot()
          case 'explain': return p.explain(query.request)
          case 'plan': return p.plan(query.document)
          case 'available': return p.available(query.role)
          case 'slots': return p.slots(query.role)
          case 'canEverServe': return p.canEverServe(query.role, query.avoid)
          case 'capacity': return p.capacity(query.role)
          case 'independenceBlocked': return p.independenceBlocked(query.role, query.avoid) ?? null
          case 'coderHeld': return p.independenceBlocked(query.role, query.avoid) === 'held'
          case 'effortOf': return p.effortOf(query.executor, query.role) ?? null
          case 'document': return p.document()
          case 'now': return p.now
          case 'stateHash': return p.stateHash()
          case 'classify': return p.classify(query.failure)
          case 'probesInFlight': return p.probesInFlight()
          case 'duplicateIds': return this.Policy.duplicateIds(query.document, query.side)
          case 'check': return this.module.check(query.document, query.kinds ?? null)
          case 'log': {
            // Answered whole by the module (`{"ok"}` or `{"error"}`), as the plain ABI does.
            const answer = JSON.parse(this.Policy.logJson(JSON.stringify(query.request ?? null)))
            if (answer.error !== undefined) throw Object.assign(new Error(answer.error.message), answer.error)
            return answer.ok
          }
          default: throw Object.assign(new Error(`unknown query '${query.query}'`), { code: 'UNKNOWN_QUERY' })
        }
      })()
      // Through JSON, as every other host's answer travels.
      return { ok: JSON.parse(JSON.stringify(value)) }
    } catch (error) {
      return errorAnswer(error)
    }
  }

  free() {
    if (this.policy !== null) this.policy.free?.()
    this.policy = null
  }
}

function describeStep(step) {
  if (step.input !== undefined) return `input ${shown(step.input)}`
  if (step.inputText !== undefined) return `input text ${JSON.stringify(step.inputText)}`
  return `query ${shown(step.query)}`
}

/** Runs one vector; `null` or a readable failure report. */
export function runVector(host, vector) {
  const fail = (i, what) => {
    const place = i === null ? 'creation' : `step ${i + 1} of ${vector.steps.length} (${describeStep(vector.steps[i])})`
    return `vector '${vector.name}' (tests/vectors/${vector.name}.json) on ${host.name}, ${place}:\n${what}`
  }
  const answerDiff = (expected, actual) =>
    `the answer differs (- expected, + actual):\n${diffLines(answerLines(expected), answerLines(actual))}`
  const created = host.create(canonical(vector.document), canonical(vector.options ?? null))
  if (vector.create !== undefined) {
    if (created === null) return fail(null, `creation succeeded, but the vector expects ${canonical(vector.create)}`)
    return equal(vector.create, created) ? null : fail(null, answerDiff(vector.create, created))
  }
  if (created !== null) return fail(null, `creation failed: ${canonical(created)}`)
  const snapshot = () => {
    const answer = host.query({ query: 'snapshot' })
    if (answer.ok === undefined) throw new Error(`the snapshot query failed: ${canonical(answer)}`)
    return answer.ok
  }
  for (const [i, step] of vector.steps.entries()) {
    const expected = step.expect
    const rejected = expected?.error !== undefined
    let answer
    if (step.query !== undefined) {
      answer = host.query(step.query)
    } else {
      const before = rejected ? snapshot() : null
      const text = step.inputText ?? canonical(step.input)
      const raw = host.step(text)
      try {
        answer = JSON.parse(raw)
      } catch (error) {
        return fail(i, `the answer is not JSON (${error.message}): ${raw}`)
      }
      if (equal(expected, answer) && before !== null) {
        const after = snapshot()
        if (!equal(before, after)) {
          return fail(i, `a rejected input changed the snapshot (- before, + after):\n${diffLines(answerLines(before), answerLines(after))}`)
        }
      }
    }
    if (!equal(expected, answer)) return fail(i, answerDiff(expected, answer))
    if (step.snapshot !== undefined) {
      const actual = keyedSnapshot(snapshot())
      if (!subset(step.snapshot, actual)) {
        return fail(i, `the snapshot differs (- expected, + actual):\n${diffLines(answerLines(step.snapshot), answerLines(restrict(step.snapshot, actual)))}`)
      }
    }
  }
  return null
}

/** Runs every vector; the failure reports. */
/** The queries only a module with the shared log's rules answers (wasm feature `log`). */
const LOG_QUERIES = new Set(['log', 'probesInFlight'])

/** Whether a vector asks a shared log's rule (a query in LOG_QUERIES). */
export const asksTheLog = (vector) => (vector.steps ?? []).some((step) => LOG_QUERIES.has(step.query?.query))

/**
 * Runs every vector; the failures' reports. A host whose module has no shared log's
 * rules (the browser build: `host.hasLog` false) runs every vector but those that ask
 * them, and lists those in `host.skipped` (its callers check that list).
 */
export function runVectors(host, vectors) {
  const failures = []
  for (const vector of vectors) {
    if (!host.hasLog && asksTheLog(vector)) {
      host.skipped.push(vector.name)
      continue
    }
    let failure
    try {
      failure = runVector(host, vector)
    } catch (error) {
      failure = `vector '${vector.name}' on ${host.name} threw: ${error?.stack ?? error}`
    }
    if (failure !== null) failures.push(failure)
  }
  host.free()
  return failures
}

// ---- FNV-1a 64 over UTF-8 bytes, in 32-bit halves (no BigInt in the hot loop) ------

const OFFSET_HI = 0xcbf29ce4
const OFFSET_LO = 0x84222325
const PRIME_LO = 0x1b3 // the prime is 2^40 + 0x1b3

export class Fnv1a {
  constructor() {
    this.hi = OFFSET_HI
    this.lo = OFFSET_LO
  }

  update(bytes) {
    let hi = this.hi
    let lo = this.lo
    for (let k = 0; k < bytes.length; k++) {
      lo = (lo ^ bytes[k]) >>> 0
      // (hi, lo) * (2^40 + 0x1b3) mod 2^64; every intermediate is an exact double.
      const t = lo * PRIME_LO
      const carry = Math.floor(t / 4294967296)
      hi = (hi * PRIME_LO + carry + ((lo << 8) >>> 0)) >>> 0
      lo = t >>> 0
    }
    this.hi = hi
    this.lo = lo
    return this
  }

  hex() {
    return this.hi.toString(16).padStart(8, '0') + this.lo.toString(16).padStart(8, '0')
  }
}

const encoder = new TextEncoder()
const NEWLINE = encoder.encode('\n')

export function hashHex(text) {
  return new Fnv1a().update(encoder.encode(text)).hex()
}

/**
 * Replays every trace of a trace file (tests/src/traces.rs) and compares the hashes
 * of the answers with the native ones. Returns the mismatch reports (at most `max`).
 */
export function replayTraces(host, file, max = 3) {
  const failures = []
  for (const trace of file.traces) {
    const created = host.create(trace.document, trace.options)
    if (created !== null) {
      failures.push(`random trace seed ${trace.seed} on ${host.name}: creation failed: ${canonical(created)}`)
    } else {
      const whole = new Fnv1a()
      for (const [i, input] of trace.inputs.entries()) {
        const answer = host.step(input)
        const bytes = encoder.encode(answer)
        whole.update(bytes).update(NEWLINE)
        const hash = new Fnv1a().update(bytes).hex()
        if (hash !== trace.hashes[i]) {
          failures.push(
            `random trace seed ${trace.seed} on ${host.name}: step ${i + 1} of ${trace.inputs.length} differs ` +
              `(native hash ${trace.hashes[i]}, ${host.name} ${hash})\n  input: ${input}\n  ${host.name} answered:\n` +
              answerLines(JSON.parse(answer)).trimEnd().replace(/^/gm, '    ') +
              `\n  the native answers: cargo run -p rota-conformance -- trace ${trace.seed}`,
          )
          break
        }
        if (i + 1 === trace.inputs.length && whole.hex() !== trace.hash) {
          failures.push(`random trace seed ${trace.seed} on ${host.name}: the whole stream hashes ${whole.hex()}, native ${trace.hash}`)
        }
      }
    }
    if (failures.length >= max) break
  }
  host.free()
  return failures
}

// ---- state-file vectors (tests/vectors/state-file/, tests/src/state_file.rs) -------------

/**
 * Runs every state-file case through `answer(requestText) -> answerText` (the
 * package's `stateFile.json`); the failure reports. `expect` is the whole answer,
 * compared as JSON (a rendered file is a string: compared exactly).
 */
export function runStateFileVectors(name, answer, vectors) {
  const failures = []
  for (const vector of vectors) {
    vector.cases.forEach((c, i) => {
      const place = `state-file vector '${vector.name}' (tests/vectors/state-file/${vector.name}.json) on ${name}, case ${i + 1} of ${vector.cases.length}${c.note ? ` (${c.note})` : ''}`
      const text = c.requestText ?? JSON.stringify(c.request)
      let actual
      try {
        actual = JSON.parse(answer(text))
      } catch (error) {
        failures.push(`${place}: ${error?.stack ?? error}`)
        return
      }
      if (!equal(c.expect, actual)) {
        failures.push(`${place}:\n  request: ${text}\n  expected: ${canonical(c.expect)}\n  actual:   ${canonical(actual)}`)
      }
    })
  }
  return failures
}
