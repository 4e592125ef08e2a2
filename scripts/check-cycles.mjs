#!/usr/bin/env node
// Fails when the project's own modules import each other in a circle. It reads every TypeScript and JavaScript file
// under src/, machines/, scripts/, bench/ and test/ with the TypeScript parser and follows each relative import:
// static imports, re-exports, `import x = require()`, `require()` and `import()` (a dynamic import still ties the two
// modules together, and an entry's lazy import of a module that imports the entry back is a circle all the same).
// What the compiler erases is left out: `import type`, `export type`, imports whose every name is `type`, and
// `.d.ts` files; `--types` counts type-only imports too (`import type` and `typeof import()` then count as well),
// for circles that cost nothing at run time but still tie two modules together. Prints each circle as `a → b → a`,
// one strongly connected group of modules per line (with all of its modules when the shortest circle shown does not
// pass through every one), and exits 1 if there is any.
//
//   node scripts/check-cycles.mjs [--types] [DIR…]      (npm run lint runs it on the default directories)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_DIRS = ['src', 'machines', 'scripts', 'bench', 'test'];
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', 'build', '.git']);

/** Every source file under `dir`, `.d.ts` files left out (they hold types only). */
function sourceFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name)) out.push(...sourceFiles(path));
    } else if (SOURCE.test(entry.name) && !/\.d\.[mc]?ts$/.test(entry.name)) {
      out.push(path);
    }
  }
  return out;
}

/** `./x.js` from `file` → the file it names: its TypeScript source when there is one, as Node16 resolution finds it. */
function resolveImport(file, specifier) {
  if (!specifier.startsWith('.')) return null;
  const base = resolve(dirname(file), specifier);
  const ext = extname(base);
  const stem = ['.js', '.mjs', '.cjs'].includes(ext) ? base.slice(0, -ext.length) : base;
  const swapped = { '.js': ['.ts', '.tsx'], '.mjs': ['.mts'], '.cjs': ['.cts'] }[ext] ?? [];
  const candidates = [...swapped.map((e) => stem + e), base, ...['.ts', '.js', '.mjs', '.cjs'].map((e) => base + e), ...['index.ts', 'index.js'].map((i) => join(base, i))];
  for (const candidate of candidates) {
    if (existsSync(candidate) && statSync(candidate).isFile() && SOURCE.test(candidate) && !/\.d\.[mc]?ts$/.test(candidate)) return candidate;
  }
  return null;
}

/** Whether an import or export declaration survives compilation: false when every name it brings is a type. */
function carriesValues(node) {
  if (ts.isImportDeclaration(node)) {
    const clause = node.importClause;
    if (!clause) return true; // `import './x.js'`: evaluated for its effects.
    if (clause.isTypeOnly) return false;
    if (clause.name) return true;
    const bindings = clause.namedBindings;
    if (!bindings || ts.isNamespaceImport(bindings)) return true;
    // `import {} from './x.js'` is kept by the compiler; `import { type A } from` is not.
    return bindings.elements.length === 0 || bindings.elements.some((e) => !e.isTypeOnly);
  }
  if (ts.isExportDeclaration(node)) {
    if (node.isTypeOnly) return false;
    const clause = node.exportClause;
    return !clause || !ts.isNamedExports(clause) || clause.elements.length === 0 || clause.elements.some((e) => !e.isTypeOnly);
  }
  return true;
}

/** The relative module specifiers `file` loads at run time, with how (`import`, `import()`, `require`). */
function importsOf(file, types) {
  const text = readFileSync(file, 'utf8');
  const kind = /\.[mc]?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind);
  const found = [];
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      if (types || carriesValues(node)) found.push({ specifier: node.moduleSpecifier.text, how: 'import' });
    } else if (ts.isImportEqualsDeclaration(node) && (types || !node.isTypeOnly) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteral(expression)) found.push({ specifier: expression.text, how: 'require' });
    } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0])) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword) found.push({ specifier: node.arguments[0].text, how: 'import()' });
      else if (ts.isIdentifier(callee) && callee.text === 'require') found.push({ specifier: node.arguments[0].text, how: 'require' });
    } else if (types && ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ specifier: node.argument.literal.text, how: 'type' });
    }
    // Types (`typeof import('./x.js')` among them) are erased: nothing under a type node loads a module.
    if (types || !ts.isTypeNode(node)) ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The import graph: file → Map(imported file → how); with `types`, type-only imports are edges too. */
export function importGraph(dirs = DEFAULT_DIRS, { types = false } = {}) {
  const files = dirs.flatMap((dir) => (existsSync(resolve(root, dir)) ? sourceFiles(resolve(root, dir)) : []));
  const graph = new Map();
  for (const file of files) {
    const edges = new Map();
    for (const { specifier, how } of importsOf(file, types)) {
      const target = resolveImport(file, specifier);
      if (target && !edges.has(target)) edges.set(target, how);
    }
    graph.set(file, edges);
  }
  return graph;
}

/** Tarjan's strongly connected components with more than one module, or one that imports itself. */
function circles(graph) {
  let index = 0;
  const indices = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const groups = [];
  const connect = (start) => {
    // Iterative, so a deep chain of imports cannot overflow the stack.
    const work = [[start, [...(graph.get(start)?.keys() ?? [])], 0]];
    indices.set(start, index);
    low.set(start, index++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const [node, next] = frame;
      if (frame[2] < next.length) {
        const to = next[frame[2]++];
        if (!graph.has(to)) continue;
        if (!indices.has(to)) {
          indices.set(to, index);
          low.set(to, index++);
          stack.push(to);
          onStack.add(to);
          work.push([to, [...graph.get(to).keys()], 0]);
        } else if (onStack.has(to)) {
          low.set(node, Math.min(low.get(node), indices.get(to)));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1][0];
        low.set(parent, Math.min(low.get(parent), low.get(node)));
      }
      if (low.get(node) === indices.get(node)) {
        const group = [];
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          group.push(member);
        } while (member !== node);
        if (group.length > 1 || graph.get(node).has(node)) groups.push(group.sort());
      }
    }
  };
  for (const node of [...graph.keys()].sort()) if (!indices.has(node)) connect(node);
  return groups;
}

/** The shortest circle from `start` back to it inside `group` (breadth-first), as a list of modules. */
function shortestCircle(graph, group, start) {
  const inGroup = new Set(group);
  const previous = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift();
    for (const to of [...graph.get(node).keys()].sort()) {
      if (!inGroup.has(to)) continue;
      if (to === start) {
        const path = [node];
        while (path[0] !== start) path.unshift(previous.get(path[0]));
        return [...path, start];
      }
      if (!previous.has(to)) {
        previous.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start, start];
}

function main() {
  const args = process.argv.slice(2);
  const types = args.includes('--types');
  const dirs = args.filter((arg) => arg !== '--types');
  const graph = importGraph(dirs.length > 0 ? dirs : DEFAULT_DIRS, { types });
  const name = (file) => relative(root, file);
  const groups = circles(graph);
  for (const group of groups) {
    const circle = shortestCircle(graph, group, group[0]);
    const steps = circle.map((file, i) => (i === 0 ? name(file) : `${graph.get(circle[i - 1]).get(file) === 'import' ? '→' : `→(${graph.get(circle[i - 1]).get(file)})`} ${name(file)}`));
    const rest = group.length > circle.length - 1 ? ` [all ${group.length}: ${group.map(name).join(', ')}]` : '';
    process.stderr.write(`import circle: ${steps.join(' ')}${rest}\n`);
  }
  if (groups.length > 0) {
    process.stderr.write(`${groups.length} import circle${groups.length === 1 ? '' : 's'} among ${graph.size} modules\n`);
    process.exit(1);
  }
  process.stdout.write(`no import circles among ${graph.size} modules\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
