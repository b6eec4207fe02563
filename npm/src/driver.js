// The roster driver's entry for api.js: one Roster over a log (src/roster/).

export { DRIVER_STEP, HANDLE_AT_LEVEL, NO_PERSIST, defineRoster } from './roster/Roster.js'
export { Lease, asyncDisposeSymbol, disposeSymbol } from './roster/requests.js'
export { combineUpdates } from './roster/state.js'
