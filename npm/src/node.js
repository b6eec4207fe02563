// The Node entry. The WebAssembly module (the web build of wasm-bindgen) is compiled
// synchronously from the file next to this one at import: nothing to await before use.

import { readFileSync } from 'node:fs'
import * as wasm from '../pkg/web/rota_wasm.js'
import { buildApi } from './api.js'
import { fileStateStore, readRosterFile } from './state-file.js'

wasm.initSync({ module: readFileSync(new URL('../pkg/web/rota_wasm_bg.wasm', import.meta.url)) })

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
} = api

export { fileStateStore }
export { memoryState, webStorageState } from './storage-state.js'
export {
  classifyFailure,
  isModelUnavailableMessage,
  parseResetTime,
  parseRetryAfter,
  FAILURE_KINDS,
  ERROR_CODES,
  RotaError,
} from './api.js'
