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

/**
 * `parseTrace` in slices, for long traces: the `steps` array of a JSON trace is cut
 * into pieces of about `sliceChars` characters (at commas between its elements) and
 * each piece parsed on its own, yielding to the event loop for `yieldFn` between
 * slices. `onProgress(share)` (0..1) follows: the scan is the first half, parsing the
 * second. Anything else (JSON Lines, the variants, a syntax error) goes to
 * `parseTrace`, whose errors say what is wrong.
 */
export async function parseTraceInSlices(text, { onProgress = () => {}, sliceChars = 1 << 20, yieldFn = nextTask } = {}) {
  const located = await locateSteps(text, { sliceChars, yieldFn, onProgress })
  if (!located) return parseTrace(text)
  let header
  try {
    header = JSON.parse(text.slice(0, located.open + 1) + text.slice(located.close))
  } catch {
    return parseTrace(text)
  }
  const steps = []
  for (const [from, to] of located.pieces) {
    let piece
    try {
      piece = JSON.parse(`[${text.slice(from, to)}]`)
    } catch {
      return parseTrace(text)
    }
    for (const step of piece) steps.push(step)
    onProgress(0.5 + to / text.length / 2)
    await yieldFn()
  }
  header.steps = steps
  return normalizeTrace(header)
}

/** A macrotask boundary: lets input, timers and painting run. */
export function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0))
}

const QUOTE = 34
const BACKSLASH = 92
const COMMA = 44
const OPEN_BRACE = 123
const CLOSE_BRACE = 125
const OPEN_BRACKET = 91
const CLOSE_BRACKET = 93

/**
 * Where the top-level `"steps": [ ... ]` array of a JSON object lies: `{ open, close,
 * pieces }` (`open`/`close` the brackets' offsets, `pieces` `[from, to)` ranges of
 * whole elements), or null when the text is not shaped so. Scans once, tracking only
 * strings and nesting depth.
 */
async function locateSteps(text, { sliceChars, yieldFn, onProgress }) {
  let i = 0
  while (i < text.length && text.charCodeAt(i) <= 32) i++
  if (text.charCodeAt(i) !== OPEN_BRACE) return null
  let depth = 0
  let open = -1
  let close = -1
  let lastKey = null
  let stringStart = -1
  let pieceFrom = -1
  const pieces = []
  let nextYield = i + sliceChars
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      // A string: skip to its end (a key at depth 1 is remembered).
      stringStart = i
      i++
      while (i < text.length) {
        const d = text.charCodeAt(i)
        if (d === BACKSLASH) i += 2
        else if (d === QUOTE) break
        else i++
      }
      if (depth === 1) lastKey = text.slice(stringStart + 1, i)
      continue
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++
      if (depth === 2 && c === OPEN_BRACKET && lastKey === 'steps' && open < 0) {
        open = i
        pieceFrom = i + 1
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth === 2 && c === CLOSE_BRACKET && open >= 0 && close < 0 && pieceFrom >= 0) {
        close = i
        if (text.slice(pieceFrom, i).trim()) pieces.push([pieceFrom, i])
        pieceFrom = -1
      }
      depth--
      if (depth === 0) break
    } else if (c === COMMA && depth === 2 && pieceFrom >= 0 && close < 0 && i - pieceFrom >= sliceChars) {
      pieces.push([pieceFrom, i])
      pieceFrom = i + 1
    }
    if (i >= nextYield) {
      nextYield = i + sliceChars
      onProgress(i / text.length / 2)
      await yieldFn()
    }
  }
  if (open < 0 || close < 0 || depth !== 0) return null
  return { open, close, pieces }
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
