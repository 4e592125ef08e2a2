/**
 * Unknown sections and keys are set aside, not fatal: an image built for another version of bootstate (or for
 * azure-init) must still boot. Each is removed from the parsed file and described as `[section] key: unknown
 * key, ignored` so the loader can warn and `bootstate config check` can refuse.
 */
import { ConfigSchema, isTable } from './schema.js';

/** Section → its keys, from the schema itself so a key added there is known here. */
export function knownKeys(): Map<string, Set<string>> {
  return new Map(
    Object.entries(ConfigSchema.entries).map(([section, schema]) => [section, new Set(Object.keys((schema as { entries: object }).entries))]),
  );
}

/**
 * Removes unknown sections and keys from `doc` (in place) and describes each. A known section whose value is not a
 * table is left for the schema to refuse. `names` maps our section names back to the ones written.
 */
export function setAsideUnknown(doc: Record<string, unknown>, names: Map<string, string>, known = knownKeys()): string[] {
  const found: string[] = [];
  for (const section of Object.keys(doc)) {
    const keys = known.get(section);
    if (!keys) {
      found.push(isTable(doc[section]) ? `[${section}]: unknown section, ignored` : `${section}: unknown top-level key, ignored`);
      delete doc[section];
      continue;
    }
    const table = doc[section];
    if (!isTable(table)) continue;
    for (const key of Object.keys(table)) {
      if (keys.has(key)) continue;
      found.push(`[${names.get(section) ?? section}] ${key}: unknown key, ignored`);
      delete table[key];
    }
  }
  return found;
}
