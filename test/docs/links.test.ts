/**
 * Every reference the repository makes to itself resolves: markdown links (files and #anchors) in README.md and
 * docs/*.md, and repository paths named in code comments and in those pages (test/docs/references.ts says exactly
 * what is read). A failure lists every broken reference as `file:line  reference  — problem`; a path that moved is
 * listed with where a file of that name is now, and a missing anchor with the nearest anchors the page has.
 * Also: no comment cites the specification that is not in the repository, or an issue number a reader cannot look up.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkRepository,
  codeComments,
  formatBroken,
  githubSlug,
  lineOf,
  markdownAnchors,
  markdownLinks,
  parsedComments,
  pathTokens,
  type CheckResult,
  type CommentedFile,
} from './references.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

describe('this repository', () => {
  let files: CommentedFile[];
  let result: CheckResult;
  beforeAll(() => {
    files = codeComments(REPO);
    result = checkRepository(REPO, files);
  });

  it('resolves every link of README.md and docs/*.md and every repository path in comments and pages', () => {
    const broken = formatBroken(result.broken);
    expect(broken, `${broken.length} broken references (file:line  reference  — problem):\n${broken.join('\n')}\n`).toEqual([]);
  });

  it('has read what it checks: the pages link to each other and the comments name files', () => {
    // A scanner that silently found nothing would pass the test above.
    expect(result.links).toBeGreaterThan(100);
    expect(result.paths).toBeGreaterThan(400);
  });

  it('cites docs/protocol.md in comments, never a "spec §" the repository does not hold, nor an issue number', () => {
    const found: string[] = [];
    for (const { file, source, comments } of files) {
      for (const comment of comments) {
        for (const m of comment.text.matchAll(/spec §|\bissues? #?\d+|\bDESIGN\b/gi)) {
          found.push(`${file}:${lineOf(source, comment.start + m.index)}  ${m[0]}`);
        }
      }
    }
    expect(found, `comments citing what a reader cannot look up:\n${found.join('\n')}\n`).toEqual([]);
  });
});

describe('the reference checker', () => {
  let root: string;
  const put = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'bootstate-links-'));
    put('README.md', [
      '# Project',
      '',
      'See [the guide](docs/guide.md), [its setup](docs/guide.md#setting-up), [a gap](docs/guide.md#nowhere),',
      '[a missing page](docs/missing.md) and [this](#project). `[not a link](nowhere.md)` is code.',
      '',
      '```sh',
      '[inside a block](nowhere.md) src/gone.ts',
      '```',
      '',
      'The code is in `src/real.ts`, once was in src/gone.ts. Pattern: `test/*.test.ts`, `docs/trace-<kind>.png`.',
      '![picture](docs/missing.svg) [web](https://example.com/x.md)',
    ].join('\n'));
    put('docs/guide.md', [
      '# The guide',
      '',
      '## Setting up',
      '',
      '## Setting up',
      '',
      '```',
      '# not a heading',
      '```',
      '',
      'Back to [the README](../README.md#project), to [nothing](../README.md#nothing), to [code](../src/real.ts),',
      'to [a page that is not there](gone.md).',
    ].join('\n'));
    put('src/real.ts', [
      '/** Cites docs/guide.md#setting-up and docs/guide.md#setting-up-1, and docs/guide.md#no-such-part. */',
      "const literal = 'src/gone.ts is a string, not a comment';",
      'const template = `${literal} // src/also-gone.ts is in a template`;',
      'const pattern = /src\\/regex-gone\\.ts/; // but src/old/moved.ts is a comment',
      '// machines/x.ts is gone, src/real.ts exists.',
      'export { template, pattern };',
    ].join('\n'));
    put('src/new/moved.ts', '// moved here\n');
    put('scripts/run.sh', '#!/bin/sh\necho "# packaging/none" # packaging/gone.service\n');
    put('src/native/x.c', '/* bench/gone.mjs */\nconst char *s = "// src/not-a-comment.ts";\n');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('reports each broken link and path once, with file, line and why, and nothing that resolves', () => {
    const { broken } = checkRepository(root);
    expect(formatBroken(broken)).toEqual([
      'README.md:3  docs/guide.md#nowhere  — docs/guide.md has no heading or <a id> with anchor #nowhere (nearest: #the-guide, #setting-up, #setting-up-1)',
      'README.md:4  docs/missing.md  — no such file',
      'README.md:7  src/gone.ts  — no such file',
      'README.md:10  src/gone.ts  — no such file',
      'README.md:11  docs/missing.svg  — no such file',
      'docs/guide.md:11  ../README.md#nothing  — README.md has no heading or <a id> with anchor #nothing (nearest: #project)',
      'docs/guide.md:12  gone.md  — docs/gone.md: no such file',
      'scripts/run.sh:2  packaging/gone.service  — no such file',
      'src/native/x.c:1  bench/gone.mjs  — no such file',
      'src/real.ts:1  docs/guide.md#no-such-part  — docs/guide.md has no heading or <a id> with anchor #no-such-part (nearest: #the-guide, #setting-up, #setting-up-1)',
      'src/real.ts:4  src/old/moved.ts  — no such file; a file of that name is at src/new/moved.ts',
      'src/real.ts:5  machines/x.ts  — no such file',
    ]);
  });

  it('takes GitHub slugs of headings as rendered, numbering repeats, ignoring headings in code', () => {
    expect(githubSlug("The admin's sudo")).toBe('the-admins-sudo');
    expect(githubSlug('Readiness: logins never wait for a report')).toBe('readiness-logins-never-wait-for-a-report');
    expect(githubSlug('`bootstate kvp`: a pool from the shell')).toBe('bootstate-kvp-a-pool-from-the-shell');
    expect(githubSlug('Local faults: the machine fights back')).toBe('local-faults-the-machine-fights-back');
    expect(githubSlug('[Linked](x.md) and *em*')).toBe('linked-and-em');
    expect(githubSlug('SSH keys (authorized_keys)')).toBe('ssh-keys-authorized_keys');
    expect([...markdownAnchors('# A\n## A\n```\n# B\n```\n<a id="c"></a>\n')]).toEqual(['a', 'a-1', 'c']);
  });

  it('finds links outside code and paths with their anchors, not patterns or outside paths', () => {
    expect(markdownLinks('[a](x.md) `[b](y.md)` ![c](z.png "title")\n```\n[d](w.md)\n```')).toEqual([
      { line: 1, target: 'x.md' },
      { line: 1, target: 'z.png' },
    ]);
    expect(pathTokens('see src/a.ts, docs/p.md#x-y. and /usr/src/b.ts ../test/c.ts test/*.ts docs/t-<k>.png').map((t) => [t.path, t.anchor])).toEqual([
      ['src/a.ts', undefined],
      ['docs/p.md', 'x-y'],
    ]);
  });

  it('reads comments the way the parser does: not strings, templates or regular expressions', () => {
    const source = "const a = '// no'; /* yes 1 */ const b = `// ${a} no`; const r = /\\/\\/ no/; // yes 2\n";
    expect(parsedComments(source).map((c) => c.text)).toEqual(['/* yes 1 */', '// yes 2']);
  });
});
