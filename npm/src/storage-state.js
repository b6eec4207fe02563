// State adapters for hosts without a file system. Both keep the seed's format and its
// sharing rule: a save replaces its roster's entries and keeps everyone else's.

const stillValid = (entry, now) =>
  entry !== null &&
  typeof entry === 'object' &&
  entry.kind !== 'run' &&
  !((entry.kind === 'until' || entry.kind === 'manual') && typeof entry.until === 'number' && entry.until <= now)

const apply = (current, { ids, state }, now) => {
  const mine = new Set(ids)
  const others = (current?.exclusions ?? []).filter((e) => !mine.has(e?.id) && stillValid(e, now))
  return { version: 1, exclusions: [...others, ...state.exclusions.filter((e) => e.kind !== 'run')] }
}

/** State kept in memory (tests, or sharing between rosters of one page). */
export function memoryState(initial) {
  let value = initial === undefined ? undefined : structuredClone(initial)
  return {
    load: async () => (value === undefined ? undefined : structuredClone(value)),
    save: async (update, { now }) => {
      value = apply(value, update, now)
    },
    get value() {
      return value
    },
  }
}

/**
 * State in a Web Storage (`localStorage`) entry. A value that is not state is moved
 * aside to `<key>.corrupt-<epoch ms>` and reported, and the roster starts clean.
 */
export function webStorageState(storage, key = 'rota-state') {
  const read = () => {
    const text = storage.getItem(key)
    if (text === null) return { missing: true }
    try {
      const value = JSON.parse(text)
      if (value === null || typeof value !== 'object' || !Array.isArray(value.exclusions ?? [])) {
        return { corrupt: 'not a state object' }
      }
      return { state: { version: 1, exclusions: value.exclusions ?? [] } }
    } catch (error) {
      return { corrupt: `not JSON (${error.message})` }
    }
  }
  const quarantine = (reason, { now, event }) => {
    const aside = `${key}.corrupt-${now}`
    storage.setItem(aside, storage.getItem(key) ?? '')
    storage.removeItem(key)
    event('warn', 'stateCorrupt', `the roster state '${key}' is unreadable (${reason}); moved aside to '${aside}', starting clean`, {
      key,
      reason,
      movedTo: aside,
    })
  }
  return {
    async load(context) {
      const result = read()
      if (result.missing) return undefined
      if (result.state) return result.state
      quarantine(result.corrupt, context)
      return undefined
    },
    async save(update, context) {
      const result = read()
      if (result.corrupt) quarantine(result.corrupt, context)
      storage.setItem(key, JSON.stringify(apply(result.state, update, context.now)))
    },
    async discard(reason, context) {
      quarantine(reason, context)
    },
  }
}
