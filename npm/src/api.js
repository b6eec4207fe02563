// The package's exports, over one initialised wasm-bindgen module. Both entries
// (Node and browser) re-export this with their platform.

import { classifyFailure, isModelUnavailableMessage, parseResetTime, parseRetryAfter, FAILURE_KINDS } from './classify.js'
import { Lease, combineUpdates, defineRoster } from './driver.js'
import { ERROR_CODES, RotaError } from './errors.js'

/**
 * Wraps the wasm-bindgen module: the raw `Policy` class and the document utilities,
 * plus the `Roster` driver for `platform`.
 */
export function buildApi(wasm, platform) {
  const Roster = defineRoster(wasm, platform)
  return {
    Roster,
    Lease,
    Policy: wasm.Policy,
    validate: (document, kinds) => wasm.validate(document, kinds),
    merge: (user, repo) => wasm.merge(user ?? null, repo ?? null),
    narrow: (document, ids = []) => wasm.narrow(document, typeof ids === 'string' ? ids.split(',').map((s) => s.trim()).filter(Boolean) : ids),
    parseDuration: (text) => wasm.parseDuration(text),
    formatDuration: (ms) => wasm.formatDuration(ms),
    defaultOptions: () => wasm.defaultOptions(),
    defaultRoles: () => wasm.defaultRoles(),
    coreVersion: wasm.version(),
    combineUpdates,
  }
}

export { classifyFailure, isModelUnavailableMessage, parseResetTime, parseRetryAfter, FAILURE_KINDS, ERROR_CODES, RotaError }
