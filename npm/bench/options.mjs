// The benches' command line: `--name value` options, taken out of `args` as they are
// read, so that what remains is the positional arguments.

/** The value after `name` in `args` (both removed), or `fallback` when it is absent. */
export function takeOption(args, name, fallback) {
  const i = args.indexOf(name)
  if (i < 0) return fallback
  const [, value] = args.splice(i, 2)
  if (value === undefined) {
    console.error(`${name} needs a value`)
    process.exit(2)
  }
  return value
}
