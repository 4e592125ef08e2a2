/**
 * The README stays a guide a newcomer reads in minutes: at most 200 lines, its two commands are the ones CI runs
 * (`.ci/run`, in the same order, npm's notice flags aside), and it links every page of docs/ so nothing there is out
 * of reach.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { markdownLinks } from './references.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const readme = readFileSync(resolve(REPO, 'README.md'), 'utf8');

/** The commands of the README's first `sh` block after its "two commands" heading, comments stripped. */
function readmeCommands(): string[] {
  const section = readme.slice(readme.indexOf('## Try it'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '');
}

describe('README.md', () => {
  it('is at most 200 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(200);
  });

  it('gives exactly two commands, and .ci/run runs both as written, in that order', () => {
    const commands = readmeCommands();
    expect(commands).toEqual(['npm ci && npm start', 'npm test']);
    // .ci/run quiets npm ci's audit and funding notices; those flags change nothing that is installed or run.
    const ci = readFileSync(resolve(REPO, '.ci/run'), 'utf8')
      .split('\n')
      .map((line) => line.replace(/ --no-(audit|fund)\b/g, '').trim());
    const at = commands.map((command) => ci.indexOf(command));
    expect(at.every((index) => index >= 0), `.ci/run runs ${JSON.stringify(commands)}`).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
  });

  it('links every page of docs/', () => {
    const linked = new Set(markdownLinks(readme).map(({ target }) => target.replace(/#.*$/, '')));
    const pages = readdirSync(resolve(REPO, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
  });
});
