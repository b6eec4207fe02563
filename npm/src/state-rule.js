// The state file's rule, from the core (`rota_core::state_file`, the module's
// `stateFileJson`): what a file holds, what a restore gets, what a write leaves. The
// stores (`state-file.js`, `storage-state.js`) only do the IO around it.

import { RotaError } from './errors.js'

/** `{ parse, restore, merge, render, asideName }` over one wasm-bindgen module. */
export function stateRule(wasm) {
  const call = (request) => {
    const answer = JSON.parse(wasm.stateFileJson(JSON.stringify(request)))
    if (answer.error !== undefined) throw new RotaError(answer.error.code, answer.error.message)
    return answer.ok
  }
  return {
    /** The raw request: JSON text in, the core's answer text out (conformance). */
    json: (request) => wasm.stateFileJson(request),
    /** `{ format: 'seed' | 'rota', exclusions }`; throws STATE_FILE_CORRUPT. */
    parse: (text) => call({ op: 'parse', text }),
    /** The `state` of a `restore` input: the file's live entries; throws STATE_FILE_CORRUPT. */
    restore: (text, now) => call({ op: 'restore', text, now }),
    /** The text to write: `existing` (`null`: no file) after `persists` (in order). */
    merge: (existing, persists, now) => call({ op: 'merge', existing, persists, now }),
    /** The seed's text for these exclusions. */
    render: (exclusions) => call({ op: 'render', exclusions }),
    /** Where a corrupt `name` goes: `<name>.corrupt-<ISO time without colons>[-n]`. */
    asideName: (name, now, attempt = 0) => call({ op: 'asideName', name, now, attempt }),
  }
}

/** Whether an error says a text is not a state file (set it aside, never write over it). */
export const isCorrupt = (error) => error?.code === 'STATE_FILE_CORRUPT'
