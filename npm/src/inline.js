// `rota/inline` outside Node: the browser entry with the WebAssembly module's bytes
// built into the JavaScript (about a third larger than the .wasm file), compiled
// synchronously at import. No file to serve, no top-level await, no `import.meta.url`:
// for a bundler that does not follow `new URL(…, import.meta.url)` (esbuild) or a
// bundle format without top-level await (iife, CommonJS).

import * as wasm from '../pkg/web/rota_wasm.js'
import { wasmBytes } from '../pkg/web/rota_wasm_embedded.js'
import { buildApi } from './api.js'
import { emitterOverTarget } from './events.js'
import { stateRule } from './state-rule.js'
import { storageStates } from './storage-state.js'

wasm.initSync({ module: wasmBytes() })

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
} from './api.js'
