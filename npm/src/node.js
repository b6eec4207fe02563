// The Node entry. Its WebAssembly module (npm/pkg/node: made for speed, with the binary
// step behind `Policy#handle`; wasm-bindgen's web glue) is compiled synchronously at
// import from bytes embedded in a JS module: nothing to await before use, and no file
// to find, so a bundle (esbuild, webpack, Vite; ESM or CommonJS) works as the package.

import { EventEmitter } from 'node:events'
import * as wasm from '../pkg/node/rota_wasm.js'
import { wasmBytes } from '../pkg/node/rota_wasm_embedded.js'
import { buildApi } from './api.js'
import { emitterOver } from './events.js'
import { readRosterFile, watchRosterFiles } from './roster-file.js'
import { fileStateStore as fileStore } from './state-file.js'
import { stateRule } from './state-rule.js'
import { storageStates } from './storage-state.js'

wasm.initSync({ module: wasmBytes() })

const SHARED_ROSTER = './roster/pg-log.js'

const rule = stateRule(wasm)

/** A `{ load, save, discard }` store over one state file (the `statePath` option's). */
export const fileStateStore = (path) => fileStore(rule, path)
export const { memoryState, webStorageState } = storageStates(rule)

const api = buildApi(wasm, {
  name: 'node',
  readRoster: readRosterFile,
  watchRoster: watchRosterFiles,
  fileStore: fileStateStore,
  emitter: () => emitterOver(new EventEmitter()),
  // Loaded on the first `Roster.create({ shared })` only. A specifier in a variable:
  // bundlers leave it alone, so a bundle of the embedded roster never pulls in `pg`.
  sharedRoster: () => import(SHARED_ROSTER),
})

export const {
  Roster,
  Lease,
  Policy,
  validate,
  merge,
  narrow,
  check,
  redact,
  parseDuration,
  formatDuration,
  defaultOptions,
  defaultRoles,
  coreVersion,
  stateFile,
  classifyFailure,
  probeIsUp,
} = api

export {
  failureFacts,
  parseRetryAfter,
  FAILURE_KINDS,
  ERROR_CODES,
  RotaError,
  cloneName,
} from './api.js'
