// The browser entry: the same driver without a file system. The roster document comes
// as `document`; state goes through an optional `state: { load, save }` adapter (see
// `webStorageState`). The WebAssembly module loads once, at import (top-level await).

import init, * as wasm from '../pkg/web/rota_wasm.js'
import { buildApi } from './api.js'

await init({ module_or_path: new URL('../pkg/web/rota_wasm_bg.wasm', import.meta.url) })

const api = buildApi(wasm, { name: 'browser' })

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

export { memoryState, webStorageState } from './storage-state.js'
export {
  failureFacts,
  parseRetryAfter,
  FAILURE_KINDS,
  ERROR_CODES,
  RotaError,
} from './api.js'
