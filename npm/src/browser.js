// The browser entry: the same driver without a file system. The roster document comes
// as `document`; state goes through an optional `state: { load, save }` adapter (see
// `webStorageState`). The WebAssembly module loads once, at import (top-level await),
// from the file next to the glue: `new URL(…, import.meta.url)`, which webpack and
// Vite follow and emit as an asset. `rota/inline` (inline.js) has the bytes built in.

import init, * as wasm from '../pkg/web/rota_wasm.js'
import { buildApi } from './api.js'
import { emitterOverTarget } from './events.js'
import { stateRule } from './state-rule.js'
import { storageStates } from './storage-state.js'

await init({ module_or_path: new URL('../pkg/web/rota_wasm_bg.wasm', import.meta.url) })

const api = buildApi(wasm, { name: 'browser', emitter: () => emitterOverTarget() })

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

export const { memoryState, webStorageState } = storageStates(stateRule(wasm))
export {
  failureFacts,
  parseRetryAfter,
  FAILURE_KINDS,
  ERROR_CODES,
  RotaError,
  cloneName,
} from './api.js'
