// Roster files: YAML (.yaml/.yml), `$schema` in a document, `watch: true` live reload,
// the package's JSON Schema (checked with Ajv against every conformance vector's
// document: what the core accepts the schema accepts), and rosterPath's missing file.

import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { test } from 'node:test'
import { Roster, validate } from 'rota'
import { keepAlive, nextEvent, rejection, tempDir } from './helpers.mjs'

const root = process.env.ROTA_PACKAGE_ROOT
const vectors = process.env.ROTA_VECTORS
const requireInstalled = createRequire(join(process.env.ROTA_TEST_PROJECT ?? '.', 'package.json'))

const yaml = `# the roster, in YAML
executors:
  - id: local
    harness: lm-studio
    model: qwen3-coder
    roles: [coder, reviewer]
    slots: 2
    cooldown: { outage: 2 minutes }
  - id: claude
    harness: claude
    roles: [planner, coder]
    priority: { coder: 2, default: 1 }
`

test('a .yaml or .yml roster file is read as YAML; a bad one names the file', async (t) => {
  const dir = tempDir(t)
  for (const name of ['roster.yaml', 'roster.yml']) {
    writeFileSync(join(dir, name), yaml)
    const roster = await Roster.create({ rosterPath: join(dir, name), probe: false })
    assert.deepEqual(roster.executors.map((e) => [e.id, e.slots ?? 1]), [['local', 2], ['claude', 1]])
    assert.equal(roster.slots('coder'), 2)
    await roster.close()
  }
  writeFileSync(join(dir, 'bad.yaml'), 'executors: [ { id: a\n')
  const error = await rejection(Roster.create({ rosterPath: join(dir, 'bad.yaml') }))
  assert.equal(error.code, 'INVALID_DOCUMENT')
  assert.match(error.violations[0].message, /not YAML/)
  assert.equal(error.violations[0].path, join(dir, 'bad.yaml'))
})

test('rosterPath: a missing file counts as absent; with no roster at all, INVALID_DOCUMENT', async (t) => {
  const dir = tempDir(t)
  const missing = join(dir, 'nope.json')
  const none = await rejection(Roster.create({ rosterPath: missing }))
  assert.equal(none.code, 'INVALID_DOCUMENT')
  assert.match(none.message, /does not exist/)
  writeFileSync(join(dir, 'repo.json'), JSON.stringify({ executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }))
  const roster = await Roster.create({ rosterPath: missing, repoRosterPath: join(dir, 'repo.json'), probe: false })
  assert.deepEqual(roster.executors.map((e) => e.id), ['a'])
  await roster.close()
})

test('$schema in a document is accepted and kept', async () => {
  const document = { $schema: './node_modules/rota/roster.schema.json', executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }
  assert.deepEqual(validate(document), [])
  const roster = await Roster.create({ document, probe: false })
  assert.equal(roster.document.$schema, './node_modules/rota/roster.schema.json')
  await roster.close()
})

test('watch: true reloads when the roster file changes; a bad edit is a reloadFailed event', async (t) => {
  keepAlive(t) // the watcher never holds the process itself
  const dir = tempDir(t)
  const path = join(dir, 'roster.json')
  const write = (executors) => writeFileSync(path, JSON.stringify({ executors }))
  write([{ id: 'a', harness: 'pi', roles: ['coder'] }])
  const roster = await Roster.create({ rosterPath: path, watch: true, probe: false })
  t.after(() => roster.close())
  let reloaded = nextEvent(roster, 'reloaded')
  write([{ id: 'a', harness: 'pi', roles: ['coder'] }, { id: 'b', harness: 'pi', roles: ['coder'] }])
  await reloaded
  assert.deepEqual(roster.executors.map((e) => e.id), ['a', 'b'])
  const failed = nextEvent(roster, 'reloadFailed')
  writeFileSync(path, '{ "executors": [ { "id": "a", "harness": "pi", "roles": ["chef"] } ] }')
  const event = await failed
  assert.equal(event.level, 'warn')
  assert.match(event.fields.violations[0].message, /unknown role/)
  assert.deepEqual(roster.executors.map((e) => e.id), ['a', 'b'], 'a bad edit changes nothing')
  // Replaced by rename, as editors save.
  reloaded = nextEvent(roster, 'reloaded')
  writeFileSync(`${path}.tmp`, JSON.stringify({ executors: [{ id: 'c', harness: 'pi', roles: ['coder'] }] }))
  renameSync(`${path}.tmp`, path)
  await reloaded
  assert.deepEqual(roster.executors.map((e) => e.id), ['c'])
  assert.equal((await rejection(Roster.create({ document: { executors: [] }, watch: true }))).code, 'INVALID_INPUT')
})

test('the JSON Schema ships in the package and accepts what the core accepts', { skip: root === undefined && 'run through test/run.mjs' }, () => {
  const schemaPath = requireInstalled.resolve('rota/roster.schema.json')
  const schema = JSON.parse(readFileSync(schemaPath, 'utf8'))
  const Ajv = createRequire(join(root, 'package.json'))('ajv/dist/2020.js')
  const ajv = new (Ajv.default ?? Ajv)({ allErrors: true, strict: false })
  const check = ajv.compile(schema)
  let accepted = 0
  for (const name of readdirSync(vectors).filter((f) => f.endsWith('.json'))) {
    const vector = JSON.parse(readFileSync(join(vectors, name), 'utf8'))
    const document = vector.document
    if (document === null || typeof document !== 'object' || validate(document, vector.options?.kinds).length > 0) continue
    assert.ok(check(document), `${name}: the core accepts its document, the schema does not: ${ajv.errorsText(check.errors)}`)
    accepted += 1
  }
  assert.ok(accepted >= 50, `checked ${accepted} documents`)
  // The README's roster example and the YAML one above.
  assert.ok(check({ $schema: './node_modules/rota/roster.schema.json', executors: [{ id: 'a', harness: 'pi', roles: ['coder'], slots: 2, cooldown: { outage: '2 minutes' } }] }))
  // Every effort and both resetTime values (issue 43).
  for (const effort of ['low', 'medium', 'high', 'max', { coder: 'low', default: 'max' }]) {
    assert.ok(check({ resetTime: 'message', executors: [{ id: 'a', harness: 'pi', roles: ['coder'], effort }] }), JSON.stringify(effort))
  }
  // Recovery and failures in a row, top level and per executor.
  for (const recovery of ['all', 'probation', { mode: 'probation', maxBackoff: 4, quietPeriod: '15 minutes' }]) {
    const document = { recovery, exclusion: { consecutiveFailures: 5 }, executors: [{ id: 'a', harness: 'pi', roles: ['coder'], recovery, exclusion: { consecutiveFailures: 0 } }] }
    assert.ok(check(document), JSON.stringify(recovery))
    assert.deepEqual(validate(document), [])
  }
  // Accounts and budgets, every budget spelling.
  for (const budget of [{ requestsPerMinute: 50 }, { requests: 5, per: '90s' }, { requests: 5, perMs: 1000 }]) {
    const doc = { accounts: { acme: { budget } }, executors: [{ id: 'a', harness: 'pi', roles: ['coder'], account: 'acme', budget }] }
    assert.ok(check(doc), JSON.stringify(budget))
    assert.deepEqual(validate(doc), [])
  }
  // Choosing: leastBusy and weights.
  const spread = { choice: 'leastBusy', executors: [{ id: 'a', harness: 'pi', roles: ['coder'], weight: 3 }, { id: 'b', harness: 'pi', roles: ['coder'], weight: 1000 }] }
  assert.ok(check(spread))
  for (const maxExcluded of ['50%', '0%', '100%', { coder: '100%', default: '50%' }]) {
    const doc = { maxExcluded, executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }
    assert.ok(check(doc), JSON.stringify(maxExcluded))
    assert.deepEqual(validate(doc), [])
  }
  assert.deepEqual(validate(spread), [])
  // Tenants: both fairness values, weights from 1 to 20, an entry without one.
  for (const fairness of ['leaseOrder', 'tenants']) {
    const doc = { fairness, tenants: { acme: { weight: 20 }, solo: { weight: 1 }, plain: {} }, executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }
    assert.ok(check(doc), fairness)
    assert.deepEqual(validate(doc), [])
  }
  // How long an idle affinity key is remembered.
  assert.ok(check({ affinityTtl: '5 minutes', executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }))
  assert.deepEqual(validate({ affinityTtl: '5 minutes', executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }), [])
  // Structure errors an editor should flag, each one the core refuses too.
  for (const bad of [
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], slots: 0 }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], weight: 0 }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], weight: 1001 }] },
    { choice: 'leastbusy', executors: [] },
    { maxExcluded: '150%', executors: [] },
    { maxExcluded: 50, executors: [] },
    { executors: [{ id: 'a', harness: 'pi', roles: 'coder' }] },
    { executors: [{ id: 'a', roles: ['coder'] }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], cooldown: { outages: '1m' } }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], health: 'ftp://x' }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], env: { KEY: 1 } }] },
    { rules: 'latest', executors: [] },
    { prefer: true, executors: [] },
    { coderSlotsDefault: 2, executors: [] },
    { clones: 'on', executors: [] },
    { leaseEvents: true, executors: [] },
    { resetTime: 'always', executors: [] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], effort: 'hgih' }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], effort: { coder: 3 } }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], effort: 2 }] },
    { recovery: 'gradual', executors: [] },
    { recovery: { mode: 'probation', maxBackoff: 0 }, executors: [] },
    { recovery: { quietPeriod: 'soon' }, executors: [] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], recovery: { jitter: true } }] },
    { exclusion: { consecutiveFailures: -1 }, executors: [] },
    { exclusion: 5, executors: [] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], exclusion: { consecutiveFailures: 1.5 } }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], account: '' }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], budget: { requests: 0, per: '1m' } }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], budget: { requestsPerMinute: 1.5 } }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], budget: { requests: 5 } }] },
    { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], budget: { requestsPerMinute: 5, burst: 2 } }] },
    { accounts: 'acme', executors: [] },
    { affinityTtl: 600000, executors: [] },
    { accounts: { acme: { budget: { perMs: 10 } } }, executors: [] },
    { accounts: { acme: { limit: 3 } }, executors: [] },
    { fairness: 'fair', executors: [] },
    { tenants: { acme: { weight: 0 } }, executors: [] },
    { tenants: { acme: { weight: 21 } }, executors: [] },
    { tenants: { acme: { weight: 1.5 } }, executors: [] },
    { tenants: { acme: { share: 2 } }, executors: [] },
    { tenants: { acme: 2 }, executors: [] },
    { tenants: [], executors: [] },
    {},
  ]) {
    assert.equal(check(bad), false, `the schema accepts ${JSON.stringify(bad)}`)
    assert.ok(validate(bad).length > 0, `the core accepts ${JSON.stringify(bad)}`)
  }
  assert.ok(existsSync(schemaPath))
})
