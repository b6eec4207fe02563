// The state file as a host keeps it, by the core's rule: the package's `stateFile`
// (npm/src/state-rule.js, over the core's `stateFileJson`), the rule every host writes
// with. A persist output carries only the executors whose entry changed; the core's
// `merge` folds it into the file's text, as a host's write does. A `restore` input is
// the file as the host read it at start: the core's text for its entries. This module
// decides nothing about the contents: it keeps the text between steps and, for the
// display, which step last wrote each entry.

export class StateFile {
  /** @param rule the package's `stateFile` (`{ parse, merge }`) */
  constructor(rule) {
    this.rule = rule
    /** The file's text as the core writes it; null while nothing was written or read. */
    this.text = null
    /** The file's entries in file order (the core's parse of `text`): `{ entry, step }`. */
    this.entries = []
    /** How many persists were folded. */
    this.persists = 0
    /** The last persist folded: `{ step, now, ids, written, removed }`, or null. */
    this.last = null
    /** id → the step whose persist (or restore) last wrote its entry. */
    this.steps = new Map()
  }

  /** Folds one step (`{ input, outputs }`, recorded at index `step`) into the file. */
  applyStep(step, index) {
    if (step.error) return // a rejected input changes nothing
    const now = step.input?.now
    if (step.input?.type === 'restore') this.restore(step.input.state, index, now)
    for (const output of step.outputs ?? []) {
      if (output.type === 'persist') this.applyPersist(output, index, now)
    }
  }

  restore(state, index, now) {
    this.text = this.rule.merge(null, [{ ids: [], state }], now)
    this.steps.clear()
    this.read(index, state?.exclusions ?? [])
  }

  applyPersist(persist, index, now) {
    this.text = this.rule.merge(this.text, [persist], now)
    this.read(index, persist.state.exclusions)
    const inFile = new Set(this.entries.map((e) => e.entry.id))
    const written = persist.state.exclusions.map((e) => e.id).filter((id) => inFile.has(id))
    const removed = persist.ids.filter((id) => !inFile.has(id))
    this.persists++
    this.last = { step: index, now, ids: [...persist.ids], written, removed }
  }

  /** Re-reads the text through the core; `written` (entries) were written at `index`. */
  read(index, written) {
    for (const { id } of written) this.steps.set(id, index)
    const { exclusions } = this.rule.parse(this.text)
    this.entries = exclusions.map((entry) => ({ entry, step: this.steps.get(entry.id) ?? null }))
    for (const id of [...this.steps.keys()]) if (!exclusions.some((e) => e.id === id)) this.steps.delete(id)
  }

  /** The file's exclusions, in file order. */
  exclusions() {
    return this.entries.map((e) => e.entry)
  }

  /** A copy that folds on independently (a replay's checkpoint). */
  clone() {
    const copy = new StateFile(this.rule)
    copy.text = this.text
    copy.entries = this.entries
    copy.persists = this.persists
    copy.last = this.last
    copy.steps = new Map(this.steps)
    return copy
  }
}

/** The file after the first `p` steps of `steps`, by `rule` (folds them all: for short lists). */
export function stateFileOf(rule, steps, p = steps.length) {
  const file = new StateFile(rule)
  for (let n = 0; n < p; n++) file.applyStep(steps[n], n)
  return file
}

/**
 * The file's text in pieces for display: `{ text }` between entries and `{ text, entry }`
 * for each entry's lines (the core's layout: an entry's braces at six spaces, its fields
 * deeper, strings never holding a raw newline). Null when the pieces do not match the
 * entries (then show the text whole).
 */
export function entryPieces(text, entries) {
  const pieces = []
  const pattern = /\n {6}\{\n[\s\S]*?\n {6}\}/g
  let at = 0
  let i = 0
  for (const match of text.matchAll(pattern)) {
    if (i >= entries.length) return null
    pieces.push({ text: text.slice(at, match.index) }, { text: match[0], entry: entries[i++] })
    at = match.index + match[0].length
  }
  if (i !== entries.length) return null
  pieces.push({ text: text.slice(at) })
  return pieces
}
