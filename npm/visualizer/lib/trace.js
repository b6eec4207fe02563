// Trace files: what `rota simulate --trace FILE` writes and what the visualizer's own
// recorder writes, and how to read the variants hosts may produce.
//
// The format (JSON):
//
//   {
//     "document": { "executors": [...] },      // the roster the run started with
//     "options":  { ... } | null,               // policy options (defaults when absent)
//     "steps": [                                // every input, in order, with what it caused
//       { "input": { "type": "lease", "now": ..., ... },
//         "outputs": [ ... ], "wakeAt": n|null }  // or "error": { "code", "message" }
//     ]
//   }
//
// Also read: `outputs` given as the host call's drained result (`{outputs, wakeAt}`),
// steps without outputs (replayed, not verified), `inputs: [...]` instead of `steps`,
// JSON Lines (a header line with `document`, then one step per line), and the
// conformance vectors of tests/vectors (`expect` as the recorded answer; their query
// and snapshot checks are skipped).

/** A trace's problem, said in words. */
export class TraceError extends Error {
  constructor(message) {
    super(message)
    this.name = 'TraceError'
  }
}

/** Parses trace text (JSON or JSON Lines) into `{ document, options, steps, meta }`. */
export function parseTrace(text) {
  let raw
  try {
    raw = JSON.parse(text)
  } catch (jsonError) {
    raw = parseJsonLines(text, jsonError)
  }
  return normalizeTrace(raw)
}

function parseJsonLines(text, jsonError) {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean)
  if (lines.length < 2) throw new TraceError(`the trace is not JSON: ${jsonError.message}`)
  const values = lines.map((line, n) => {
    try {
      return JSON.parse(line)
    } catch (e) {
      throw new TraceError(`line ${n + 1} of the trace is not JSON: ${e.message}`)
    }
  })
  const header = values.find((v) => v && typeof v === 'object' && 'document' in v)
  if (!header) throw new TraceError('a JSON Lines trace needs a header line with `document`')
  return { ...header, steps: values.filter((v) => v !== header) }
}

/** Checks a parsed trace object and gives it one shape. */
export function normalizeTrace(raw) {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new TraceError('a trace is a JSON object with `document` and `steps`')
  }
  const body = raw.trace && typeof raw.trace === 'object' && !raw.document ? raw.trace : raw
  const document = body.document ?? body.roster
  if (!document || typeof document !== 'object') throw new TraceError('the trace has no `document`')
  const list = body.steps ?? body.inputs
  if (!Array.isArray(list)) throw new TraceError('the trace has no `steps` list')
  const steps = []
  let skipped = 0
  list.forEach((entry, n) => {
    const step = normalizeStep(entry, n)
    if (step) steps.push(step)
    else skipped++
  })
  const { document: _d, roster: _r, options, steps: _s, inputs: _i, ...meta } = body
  if (skipped) meta.skippedSteps = skipped
  return { document, options: options ?? null, steps, meta }
}

/**
 * One step, or null for an entry that feeds nothing: a conformance vector's `query` or
 * `snapshot` check, or an `inputText` that is not a JSON object (the core rejects it
 * without a change of state).
 */
function normalizeStep(entry, n) {
  if (!entry || typeof entry !== 'object') throw new TraceError(`step ${n + 1} is not an object`)
  let input = entry.input ?? (typeof entry.type === 'string' ? entry : null)
  if (!input && typeof entry.inputText === 'string') {
    try {
      input = JSON.parse(entry.inputText)
    } catch {
      return null
    }
    if (!input || typeof input !== 'object' || Array.isArray(input)) return null
  }
  if (!input) {
    if ('query' in entry || 'snapshot' in entry || 'inputText' in entry) return null
    throw new TraceError(`step ${n + 1} has no \`input\``)
  }
  if (typeof input !== 'object' || Array.isArray(input)) throw new TraceError(`step ${n + 1}: the input is not an object`)
  const step = { input }
  // What the core answered: `outputs` (+ `wakeAt`), a drained result, or a vector's `expect`.
  let outputs = entry === input ? undefined : entry.outputs ?? entry.result ?? entry.output ?? entry.expect
  if (outputs && !Array.isArray(outputs) && typeof outputs === 'object') {
    if (outputs.error) step.error = outputs.error
    if ('wakeAt' in outputs) step.wakeAt = outputs.wakeAt
    outputs = outputs.outputs
  }
  if (Array.isArray(outputs)) step.outputs = outputs
  if (entry !== input && entry.error) step.error = entry.error
  if (entry !== input && 'wakeAt' in entry) step.wakeAt = entry.wakeAt
  return step
}

/** Deep equality of JSON values, ignoring the order of object keys. */
export function jsonEqual(a, b) {
  if (a === b) return true
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]))
  const ka = Object.keys(a).filter((k) => a[k] !== undefined)
  const kb = Object.keys(b).filter((k) => b[k] !== undefined)
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]))
}
