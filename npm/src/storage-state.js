// State adapters for hosts without a file system, over the core's rule (`state-rule.js`):
// the same text as a state file (the seed's envelope), the same merge (a save replaces
// its roster's entries and keeps everyone else's), the same set-aside name and event
// for a value that cannot be parsed.

import { isCorrupt } from './state-rule.js'

/** `{ memoryState, webStorageState }` over the core's `rule`. */
export function storageStates(rule) {
  /** A state object (either envelope, or `{ version, exclusions }`) or text, as text. */
  const asText = (initial) => (initial === undefined || typeof initial === 'string' ? initial : JSON.stringify(initial))

  /** State kept in memory (tests, or sharing between rosters of one page). */
  function memoryState(initial) {
    let text = asText(initial)
    return {
      load: async ({ now }) => (text === undefined ? undefined : rule.restore(text, now)),
      save: async (update, { now }) => {
        text = rule.merge(text ?? null, [update], now)
      },
      /** What it holds now, as `{ version: 1, exclusions }`. */
      get value() {
        return text === undefined ? undefined : { version: 1, exclusions: rule.parse(text).exclusions }
      },
      /** The text a state file would hold. */
      get text() {
        return text
      },
    }
  }

  /**
   * State in a Web Storage (`localStorage`) entry. A value that is not state is moved
   * aside to `<key>.corrupt-<ISO time without colons>` with a `stateFileCorrupt`
   * event, and the roster starts clean.
   */
  function webStorageState(storage, key = 'rota-state') {
    const setAside = (reason, { now, event }) => {
      let attempt = 0
      let aside = rule.asideName(key, now, attempt)
      while (storage.getItem(aside) !== null && attempt < 1000) aside = rule.asideName(key, now, ++attempt)
      storage.setItem(aside, storage.getItem(key) ?? '')
      storage.removeItem(key)
      event('warn', 'stateFileCorrupt', `the roster state '${key}' is not one rota reads (${reason}); set aside as '${aside}'`, {
        key,
        reason,
        movedTo: aside,
      })
    }
    return {
      async load(context) {
        const text = storage.getItem(key)
        if (text === null) return undefined
        try {
          return rule.restore(text, context.now)
        } catch (error) {
          if (!isCorrupt(error)) throw error
          setAside(error.message, context)
          return undefined
        }
      },
      async save(update, context) {
        const existing = storage.getItem(key)
        let text
        try {
          text = rule.merge(existing, [update], context.now)
        } catch (error) {
          if (!isCorrupt(error)) throw error
          setAside(error.message, context)
          text = rule.merge(null, [update], context.now)
        }
        storage.setItem(key, text)
      },
      async discard(reason, context) {
        if (storage.getItem(key) !== null) setAside(reason, context)
      },
    }
  }

  return { memoryState, webStorageState }
}
