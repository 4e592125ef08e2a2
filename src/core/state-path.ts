/**
 * A state value's paths, the one way every observer and reader spells them: KVP transition telemetry, the journal's
 * edge keys, the trace's words and the dry run's state lines. `{ work: { gathering: 'imds' }, inProgress: {} }` has
 * the leaf paths `work.gathering.imds` and `inProgress` (an atomic region of a parallel state reads `{}`).
 */

/** The leaf paths of a state value, in order, each under `root` when one is given (`provisioning.work.validating`). */
export function leafPaths(value: unknown, root = ''): string[] {
  if (typeof value === 'string') return [root ? `${root}.${value}` : value];
  const children = value && typeof value === 'object' ? Object.entries(value) : [];
  if (children.length === 0) return root ? [root] : [];
  return children.flatMap(([key, child]) => leafPaths(child, root ? `${root}.${key}` : key));
}

/** Every active state path of a state value, parents first: `{a: {b: 'c'}}` → `a`, `a.b`, `a.b.c` (and `root` first). */
export function activePaths(value: unknown, root = ''): string[] {
  const out = new Set<string>(root ? [root] : []);
  for (const leaf of leafPaths(value)) {
    const names = leaf.split('.');
    for (let end = 1; end <= names.length; end += 1) out.add([...(root ? [root] : []), ...names.slice(0, end)].join('.'));
  }
  return [...out];
}
