// The state file as a host keeps it. A persist output carries only the executors whose
// entry changed (`ids`) and their new entries (an id without one is cleared), so the
// file is the persists folded in order: each replaces the entries of its ids and keeps
// every other. A `restore` input is the file as the host read it at start.
// (The package's state adapters apply a save the same way: npm/src/state-file.js.)

export class StateFile {
  constructor() {
    /** id → `{ entry, step }`, in the order the file holds them (last written last). */
    this.entries = new Map()
    /** How many persists were folded. */
    this.persists = 0
    /** The last persist folded: `{ step, now, ids, written, removed }`, or null. */
    this.last = null
  }

  /** Folds one step (`{ input, outputs }`, recorded at index `step`) into the file. */
  applyStep(step, index) {
    if (step.input?.type === 'restore' && !step.error) this.restore(step.input.state, index)
    for (const output of step.outputs ?? []) {
      if (output.type === 'persist') this.applyPersist(output, index, step.input?.now)
    }
  }

  restore(state, index) {
    this.entries.clear()
    for (const entry of state?.exclusions ?? []) {
      if (entry && typeof entry.id === 'string' && entry.kind !== 'run') this.entries.set(entry.id, { entry, step: index })
    }
  }

  applyPersist({ ids, state }, index, now) {
    const written = []
    const removed = []
    for (const id of ids) this.entries.delete(id)
    for (const entry of state.exclusions) {
      this.entries.set(entry.id, { entry, step: index })
      written.push(entry.id)
    }
    for (const id of ids) if (!written.includes(id)) removed.push(id)
    this.persists++
    this.last = { step: index, now, ids: [...ids], written, removed }
  }

  /** The file's content: `{ version: 1, exclusions: [...] }`. */
  content() {
    return { version: 1, exclusions: [...this.entries.values()].map((e) => e.entry) }
  }
}

/** The file after the first `p` steps of `steps` (folds them all: for short lists). */
export function stateFileOf(steps, p = steps.length) {
  const file = new StateFile()
  for (let n = 0; n < p; n++) file.applyStep(steps[n], n)
  return file
}
