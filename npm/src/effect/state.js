// The seed's persisted roster state (`RosterStateStoreShape`) over a
// `PlainFileStoreShape` (@llm4ts/flow's `read` / `writeAtomic` / `remove`): the text the
// seed's `saveVersioned` writes, byte for byte. What a file holds, what a load gets and
// what a save leaves is the core's rule (`stateFile`: parse, restore, merge, render, the
// set-aside name), as for rota's own state files; this module only does the IO.

import * as Clock from 'effect/Clock'
import * as Effect from 'effect/Effect'
import * as Result from 'effect/Result'
import { stateFile } from 'rota'
import { exclusionOf } from './schema.js'

/** The core's answer, or its refusal as a failure (a `RotaError` with its `code`). */
const rule = (call) => Effect.try({ try: call, catch: (error) => error })
const isCorrupt = (error) => error?.code === 'STATE_FILE_CORRUPT'

/**
 * `{ load, save(ids, exclusions) }` over `files` at `path`. `load` gives the live
 * exclusions (ended ones dropped, `run` ones never written). `save` replaces the
 * entries of `ids` with `exclusions` and keeps every other entry as it was. A file that
 * is not a roster state is never written over: it is moved aside to
 * `<path>.corrupt-<ISO time without colons>` (the core's name) and the roster starts
 * without it. `files` offers no lock: writers sharing one file through it can lose each
 * other's entries (rota's own `statePath` store locks).
 */
export const makeRosterStateStore = (files, path) => {
  const setAside = (text, now) =>
    Effect.gen(function* () {
      let attempt = 0
      let aside = stateFile.asideName(path, now, attempt)
      while ((yield* files.read(aside)) !== undefined && attempt < 1000) aside = stateFile.asideName(path, now, ++attempt)
      yield* files.writeAtomic(aside, text)
      yield* files.remove(path)
    })

  const load = Effect.gen(function* () {
    const text = yield* files.read(path)
    if (text === undefined) return []
    const now = yield* Clock.currentTimeMillis
    const restored = yield* rule(() => stateFile.restore(text, now)).pipe(Effect.result)
    if (Result.isFailure(restored)) {
      if (!isCorrupt(restored.failure)) return yield* Effect.fail(restored.failure)
      yield* setAside(text, now)
      return []
    }
    return restored.success.exclusions.map((e) => exclusionOf(e.id, e))
  })

  const save = (ids, exclusions) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const update = { ids: [...ids], state: { version: 1, exclusions: exclusions.map((e) => JSON.parse(JSON.stringify(e))) } }
      const existing = yield* files.read(path)
      const merged = yield* rule(() => stateFile.merge(existing ?? null, [update], now)).pipe(Effect.result)
      let text
      if (Result.isFailure(merged)) {
        if (!isCorrupt(merged.failure)) return yield* Effect.fail(merged.failure)
        yield* setAside(existing, now)
        text = stateFile.merge(null, [update], now)
      } else {
        text = merged.success
      }
      yield* files.writeAtomic(path, text)
    })

  return { load, save }
}
