// Machines (provisioned executors): the owner of a request creates its machine and
// feeds back `machineCreated` / `machineFailed`; deleting one feeds back
// `machineDeleted` when the core holds the lease's slot until then.

import { omitUndefined } from './requests.js'

export class Machines {
  #machines
  #context

  /** `context` (the roster's side): { spec(id), request(id), feed(input), event(...), track(promise), signal, closed() }. */
  constructor(machines, context) {
    this.#machines = machines
    this.#context = context
  }

  create({ request, executor }) {
    const context = this.#context
    const create = this.#machines?.create
    const pending = context.request(request)
    const run = (async () => {
      let hold
      try {
        if (typeof create !== 'function') throw new Error('this roster has no machines.create callback')
        hold = await create({ executor, request, role: pending?.role, spec: context.spec(executor), signal: context.signal })
      } catch (error) {
        context.feed({ type: 'machineFailed', id: request, message: String(error?.message ?? error) })
        return
      }
      // Too late for anyone: delete it rather than leak it.
      if (context.closed()) await this.delete({ executor, hold })
      else context.feed({ type: 'machineCreated', id: request, hold: hold ?? null })
    })()
    context.track(run)
  }

  /**
   * Deletes a machine. With a `lease`, the core holds that lease's slot until the
   * answer (`machineDeleted`); a failure frees it too, and the core's warning names
   * the machine for a sweep.
   */
  delete({ executor, hold, lease }) {
    const context = this.#context
    const remove = this.#machines?.delete
    const answer = (ok, error) => {
      if (lease !== undefined) context.feed(omitUndefined({ type: 'machineDeleted', lease, ok, error }))
    }
    if (typeof remove !== 'function') {
      context.event('warn', 'machineNotDeleted', `no machines.delete callback: machine of ${executor} left running`, { executor, hold })
      answer(false, 'this roster has no machines.delete callback')
      return Promise.resolve()
    }
    const run = (async () => {
      try {
        await remove({ executor, hold, spec: context.spec(executor) })
      } catch (error) {
        const message = String(error?.message ?? error)
        if (lease === undefined) {
          context.event('warn', 'machineDeleteFailed', `deleting a machine of ${executor} failed: ${message}`, { executor, hold })
        }
        answer(false, message)
        return
      }
      answer(true)
    })()
    return context.track(run)
  }
}
