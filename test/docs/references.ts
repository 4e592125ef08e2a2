/**
 * Finds every reference the repository makes to itself and says which ones do not resolve:
 *
 * - markdown links in README.md and docs/*.md (`[text](path#anchor)`, relative to the page, outside code), whose
 *   file must exist and whose anchor must be a heading of that page (GitHub's slugs) or an `<a id>`;
 * - repository paths named in code comments (src/, machines/, scripts/, bench/, test/, packaging/, .ci/) and anywhere
 *   in those markdown pages, e.g. `src/azure/imds.ts`, `packaging/systemd/`, `docs/protocol.md#imds-retries`: taken
 *   from the repository root, they must exist, and a `.md` path's anchor must exist in that page.
 *
 * Comments are found by TypeScript's parser for TypeScript and JavaScript (so strings, templates and regular
 * expressions are never mistaken for comments), by a small scanner for C, and as `#` comments for shell, Python,
 * systemd units and the Debian maintainer scripts. A path followed by `*`, `<`, `{`, `$` or `%` is a pattern, not a
 * file, and is left alone. Used by test/docs/links.test.ts.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, normalize, sep } from 'node:path';
import ts from 'typescript';

/** One reference that does not resolve: where it is written, what it says, and what is wrong with it. */
export interface Broken {
  file: string;
  line: number;
  ref: string;
  problem: string;
}

/** The top-level directories whose files are code, scanned for paths in comments. */
export const CODE_DIRS = ['src', 'machines', 'scripts', 'bench', 'test', 'packaging', '.ci'];
/** The first segments a repository path may start with. */
const PATH_ROOTS = ['src', 'machines', 'scripts', 'bench', 'test', 'packaging', 'docs'];
const SKIP_DIRS = new Set(['node_modules', 'dist', 'test-output', 'build', '.git']);

const PARSED = new Set(['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs']);
const C_LIKE = new Set(['.c', '.h']);
const HASH = new Set(['.sh', '.py', '.service', '.toml', '.txt']);
/** Files without an extension that are shell or `#`-commented text (Debian maintainer scripts, .ci/run). */
const HASH_NAMES = new Set(['postinst', 'postrm', 'prerm', 'preinst', 'lintian-overrides', 'run']);

/**
 * The anchor GitHub gives a heading: its text as rendered (code spans keep their content, links their text, HTML
 * tags and emphasis marks go), lower-cased, every character but letters, digits, `_`, `-` and spaces removed,
 * spaces turned into `-`.
 */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`([^`]*)`/g, '$1')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Each line of a markdown page with whether it is inside a fenced code block (the fence lines count as inside). */
function markdownLines(markdown: string): Array<{ text: string; code: boolean }> {
  let fence: string | null = null;
  return markdown.split('\n').map((text) => {
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(text);
    if (fence === null && open) {
      fence = open[1];
      return { text, code: true };
    }
    if (fence !== null) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(text)) fence = null;
      return { text, code: true };
    }
    return { text, code: false };
  });
}

/** The anchors a markdown page offers: one per ATX heading outside code (repeats get `-1`, `-2`, …), and `<a id>`s. */
export function markdownAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text, code } of markdownLines(markdown)) {
    if (code) continue;
    for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!heading) continue;
    const slug = githubSlug(heading[1]);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Markdown links and images outside code blocks and code spans, with their 1-based line numbers. */
export function markdownLinks(markdown: string): Array<{ line: number; target: string }> {
  const links: Array<{ line: number; target: string }> = [];
  markdownLines(markdown).forEach(({ text, code }, index) => {
    if (code) return;
    const prose = text.replace(/`[^`]*`/g, (span) => ' '.repeat(span.length));
    for (const m of prose.matchAll(/!?\[(?:[^\]]|\][^(])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ line: index + 1, target: m[1] });
    }
  });
  return links;
}

/** A repository path named in text: where it starts, the path, and its `#anchor` if it has one. */
export interface PathToken {
  offset: number;
  path: string;
  anchor?: string;
}

const TOKEN = new RegExp(
  `(?<![\\w./@-])((?:${PATH_ROOTS.join('|')})/[\\w.@+-]*(?:/[\\w.@+-]+)*/?|[A-Z][A-Z0-9_-]*\\.md\\b)(#[\\w-]+)?`,
  'g',
);

/** The repository paths named in `text` (sentence punctuation after a path is not part of it; patterns are skipped). */
export function pathTokens(text: string): PathToken[] {
  const tokens: PathToken[] = [];
  for (const m of text.matchAll(TOKEN)) {
    const after = text[m.index + m[0].length] ?? '';
    if (/[*<{$%[]/.test(after)) continue;
    const path = m[2] ? m[1] : m[1].replace(/[.]+$/, '');
    const anchor = m[2] && path.endsWith('.md') ? m[2].slice(1) : undefined;
    tokens.push({ offset: m.index, path, ...(anchor ? { anchor } : {}) });
  }
  return tokens;
}

/** A comment's text and the offset of its first character in the file. */
export interface Comment {
  start: number;
  text: string;
}

/** Comments of TypeScript or JavaScript source, from the parser's view of its tokens. */
export function parsedComments(source: string, fileName = 'file.ts'): Comment[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, false, scriptKind(fileName));
  const found = new Map<number, Comment>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const range of ranges ?? []) found.set(range.pos, { start: range.pos, text: source.slice(range.pos, range.end) });
  };
  const visit = (node: ts.Node) => {
    add(ts.getLeadingCommentRanges(source, node.getFullStart()));
    add(ts.getTrailingCommentRanges(source, node.getEnd()));
    for (const child of node.getChildren(file)) visit(child);
  };
  visit(file);
  add(ts.getLeadingCommentRanges(source, file.endOfFileToken.getFullStart()));
  return [...found.values()].sort((a, b) => a.start - b.start);
}

function scriptKind(fileName: string): ts.ScriptKind {
  const ext = extname(fileName);
  return ext === '.js' || ext === '.mjs' || ext === '.cjs' ? ts.ScriptKind.JS : ts.ScriptKind.TS;
}

/** Comments of C source: `//` and `/* … *\/`, outside string and character literals. */
export function cComments(source: string): Comment[] {
  const comments: Comment[] = [];
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '"' || c === "'") {
      for (i++; i < source.length && source[i] !== c && source[i] !== '\n'; i++) if (source[i] === '\\') i++;
    } else if (c === '/' && source[i + 1] === '/') {
      const end = source.indexOf('\n', i);
      const stop = end < 0 ? source.length : end;
      comments.push({ start: i, text: source.slice(i, stop) });
      i = stop;
    } else if (c === '/' && source[i + 1] === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end < 0 ? source.length : end + 2;
      comments.push({ start: i, text: source.slice(i, stop) });
      i = stop - 1;
    }
  }
  return comments;
}

/** `#` comments (and `;` in systemd units): from a `#` at the start of a line or after a blank, outside quotes. */
export function hashComments(source: string, unit = false): Comment[] {
  const comments: Comment[] = [];
  let offset = 0;
  for (const line of source.split('\n')) {
    let quote: string | null = null;
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quote) {
        if (c === '\\' && quote === '"') i++;
        else if (c === quote) quote = null;
      } else if (c === '"' || c === "'") quote = c;
      else if ((c === '#' || (unit && c === ';' && i === 0)) && (i === 0 || /\s/.test(line[i - 1]))) {
        comments.push({ start: offset + i, text: line.slice(i) });
        break;
      }
    }
    offset += line.length + 1;
  }
  return comments;
}

/** The comments of a code file, by its kind; none for a kind that holds no comments we read (JSON, pictures, …). */
export function commentsOf(path: string, source: string): Comment[] {
  const ext = extname(path);
  if (PARSED.has(ext)) return parsedComments(source, path);
  if (C_LIKE.has(ext)) return cComments(source);
  if (HASH.has(ext) || (ext === '' && HASH_NAMES.has(basename(path)))) return hashComments(source, ext === '.service');
  return [];
}

/** Every file under `dir` (relative to `root`, with `/`), skipping build output and dependencies. */
export function walk(root: string, dir: string): string[] {
  const full = join(root, dir);
  if (!existsSync(full)) return [];
  const files: string[] = [];
  for (const entry of readdirSync(full, { withFileTypes: true })) {
    if (SKIP_DIRS.has(entry.name)) continue;
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) files.push(...walk(root, path));
    else if (entry.isFile()) files.push(path);
  }
  return files;
}

/** The markdown pages whose links and paths are checked: README.md and docs/*.md. */
export function markdownPages(root: string): string[] {
  const docs = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')) : [];
  return ['README.md', ...docs.sort().map((name) => `docs/${name}`)].filter((page) => existsSync(join(root, page)));
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}

/** A code file's comments, with its source for line numbers. */
export interface CommentedFile {
  file: string;
  source: string;
  comments: Comment[];
}

/** The comments of every code file under CODE_DIRS, parsed once for every check that reads them. */
export function codeComments(root: string): CommentedFile[] {
  return CODE_DIRS.flatMap((dir) => walk(root, dir))
    .filter(isScanned)
    .map((file) => {
      const source = readFileSync(join(root, file), 'utf8');
      return { file, source, comments: commentsOf(file, source) };
    });
}

/** 1-based line of `offset` in `text`. */
export function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** What a check found: the references that do not resolve (in file and line order), and how many were checked. */
export interface CheckResult {
  broken: Broken[];
  links: number;
  paths: number;
}

/** Checks every reference of the repository at `root` (`files`: its code comments, when already read). */
export function checkRepository(root: string, files: CommentedFile[] = codeComments(root)): CheckResult {
  const broken: Broken[] = [];
  let links = 0;
  let paths = 0;
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (page: string) => {
    let anchors = anchorCache.get(page);
    if (!anchors) anchorCache.set(page, (anchors = markdownAnchors(readFileSync(join(root, page), 'utf8'))));
    return anchors;
  };
  let everyFile: string[] | undefined;
  const sameName = (path: string) => {
    everyFile ??= [...PATH_ROOTS, ...CODE_DIRS].flatMap((dir) => walk(root, dir));
    const name = basename(path.replace(/\/$/, ''));
    return [...new Set(everyFile.filter((file) => basename(file) === name))];
  };
  const isDirectory = (path: string) => existsSync(join(root, path)) && statSync(join(root, path)).isDirectory();

  /** What is wrong with repository path `path` (and its anchor), or null when it resolves. */
  const problemWith = (path: string, anchor: string | undefined): string | null => {
    if (!existsSync(join(root, path))) {
      const elsewhere = sameName(path);
      return elsewhere.length > 0 ? `no such file; a file of that name is at ${elsewhere.join(', ')}` : 'no such file';
    }
    if (path.endsWith('/') && !isDirectory(path)) return 'not a directory';
    if (anchor !== undefined && path.endsWith('.md')) {
      const anchors = anchorsOf(path);
      if (!anchors.has(anchor)) {
        const nearest = [...anchors].sort((a, b) => editDistance(anchor, a) - editDistance(anchor, b)).slice(0, 3);
        return `${path} has no heading or <a id> with anchor #${anchor}${nearest.length ? ` (nearest: ${nearest.map((a) => `#${a}`).join(', ')})` : ''}`;
      }
    }
    return null;
  };

  const report = (file: string, line: number, ref: string, problem: string | null) => {
    if (problem && !broken.some((b) => b.file === file && b.line === line && b.ref === ref)) broken.push({ file, line, ref, problem });
  };

  for (const page of markdownPages(root)) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const { line, target } of markdownLinks(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links++;
      const hash = target.indexOf('#');
      const rawPath = hash >= 0 ? target.slice(0, hash) : target;
      const anchor = hash >= 0 ? decodeURIComponent(target.slice(hash + 1)) : undefined;
      const resolved = rawPath === '' ? page : normalize(join(dirname(page), decodeURIComponent(rawPath))).split(sep).join('/');
      if (resolved.startsWith('..')) {
        report(page, line, target, 'leaves the repository');
        continue;
      }
      const path = rawPath.endsWith('/') && !resolved.endsWith('/') ? `${resolved}/` : resolved;
      const problem = problemWith(path, path.endsWith('.md') ? anchor : undefined);
      // A relative link is named as written; say which repository path it came to when that is the trouble.
      report(page, line, target, problem && path !== rawPath && !problem.startsWith(path) ? `${path}: ${problem}` : problem);
    }
    for (const token of pathTokens(text)) {
      paths++;
      const ref = token.anchor ? `${token.path}#${token.anchor}` : token.path;
      report(page, lineOf(text, token.offset), ref, problemWith(token.path, token.anchor));
    }
  }

  for (const { file, source, comments } of files) {
    for (const comment of comments) {
      for (const token of pathTokens(comment.text)) {
        paths++;
        const ref = token.anchor ? `${token.path}#${token.anchor}` : token.path;
        report(file, lineOf(source, comment.start + token.offset), ref, problemWith(token.path, token.anchor));
      }
    }
  }
  broken.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line));
  return { broken, links, paths };
}

/** Whether the comments of `file` are read at all (by its kind). */
export function isScanned(file: string): boolean {
  const ext = extname(file);
  return PARSED.has(ext) || C_LIKE.has(ext) || HASH.has(ext) || (ext === '' && HASH_NAMES.has(basename(file)));
}

/** One line per broken reference, `file:line  ref  problem`, for a failure message one can act on line by line. */
export function formatBroken(broken: Broken[]): string[] {
  return broken.map((b) => `${b.file}:${b.line}  ${b.ref}  — ${b.problem}`);
}
