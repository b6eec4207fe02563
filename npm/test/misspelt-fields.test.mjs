// A misspelt field (issue 43): `priorty: 2` passed `Roster.create` with no word. The
// core's `check` warns for an unknown field close to a known one, naming both; the
// roster announces it as an `unknownField` warn event. A field of the user's own passes.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, check } from 'rota'

const typo = {
  signal: { outage: ['x'] },
  executors: [
    { id: 'a', harness: 'pi', roles: ['coder'], image: 'mine' },
    { id: 'b', harness: 'pi', roles: ['coder'], priorty: 2 },
  ],
}

test('check names the misspelt field and the known one', () => {
  assert.deepEqual(check(typo), {
    violations: [],
    warnings: [
      { path: 'signal', message: "the document: unknown field 'signal' — did you mean 'signals'?", event: 'unknownField' },
      { path: 'executors[1].priorty', message: "executors[1]: unknown field 'priorty' — did you mean 'priority'?", event: 'unknownField' },
    ],
  })
})

test('Roster.create announces each as an unknownField warn event; the roster runs', async (t) => {
  const events = []
  const roster = await Roster.create({ document: typo, probe: false, onEvent: (e) => events.push(e) })
  t.after(() => roster.close())
  const unknown = events.filter((e) => e.name === 'unknownField')
  assert.deepEqual(
    unknown.map((e) => [e.level, e.message, e.fields.path]),
    [
      ['warn', "roster: the document: unknown field 'signal' — did you mean 'signals'?", 'signal'],
      ['warn', "roster: executors[1]: unknown field 'priorty' — did you mean 'priority'?", 'executors[1].priorty'],
    ],
  )
  assert.equal(roster.available('coder'), 2)
})
