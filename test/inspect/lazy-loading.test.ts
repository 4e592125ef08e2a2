import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Static (not dynamic) import specifiers of a TypeScript file. */
function staticImports(file: string): string[] {
  const source = fs.readFileSync(file, 'utf8');
  return [...source.matchAll(/^\s*(?:import|export)\s[^'";]*?from\s+'([^']+)'/gm)]
    .filter((match) => !/^\s*(?:import|export)\s+type\s/.test(match[0]))
    .map((match) => match[1]!);
}

/** Every package a module pulls in statically, following relative imports. */
function staticClosure(entry: string): Set<string> {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const walk = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of staticImports(file)) {
      if (specifier.startsWith('.')) walk(path.resolve(path.dirname(file), specifier.replace(/\.js$/, '.ts')));
      else packages.add(specifier);
    }
  };
  walk(entry);
  return packages;
}

describe('what the provisioning path loads', () => {
  it('journal loads neither Graphviz, the Stately inspector nor ws', () => {
    const packages = staticClosure(path.join(root, 'src/inspect/journal.ts'));
    expect([...packages].filter((name) => /viz|statelyai|^ws$/.test(name))).toEqual([]);
  });

  it('graph and trace load Graphviz only on demand', () => {
    for (const entry of ['graph.ts', 'trace.ts']) {
      expect(staticClosure(path.join(root, 'src/inspect', entry)).has('@viz-js/viz')).toBe(false);
    }
  });

  it('nothing outside the live modules imports the live inspector statically', () => {
    const files = fs.readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts') && !/inspect[\\/]live/.test(file));
    const offenders = files.filter((file) =>
      staticImports(path.join(root, 'src', file)).some((specifier) => /inspect\/live|^\.\/live|statelyai/.test(specifier)),
    );
    expect(offenders).toEqual([]);
  });
});
