// The Node entry. Its WebAssembly module (npm/pkg/node: made for speed, with the binary
// step behind `Policy#handle`; wasm-bindgen's web glue) is compiled synchronously from
// the file at import: nothing to await before use.

import { readFileSync } from 'node:fs'
import * as wasm from '../pkg/node/rota_wasm.js'
import { buildApi } from './api.js'
import { fileStateStore, readRosterFile } from './state-file.js'

wasm.initSync({ module: readFileSync(new URL('../pkg/node/rota_wasm_bg.wasm', import.meta.url)) })

const api = buildApi(wasm, {
  name: 'node',
  readRoster: readRosterFile,
  fileStore: fileStateStore,
})

export const {
  Roster,
  Lease,
  Policy,
  validate,
  merge,
  narrow,
  parseDuration,
  formatDuration,
  defaultOptions,
  defaultRoles,
  coreVersion,
  classifyFailure,
  probeIsUp,
} = api

export { fileStateStore }
export { memoryState, webStorageState } from './storage-state.js'
export {
  failureFacts,
  parseRetryAfter,
  FAILURE_KINDS,
  ERROR_CODES,
  RotaError,
} from './api.js'
