/**
 * The built CLI follows the conventions of clap, argparse and GNU tools: every subcommand answers `--help` with
 * every option it accepts, a mistyped subcommand gets the nearest one suggested, and every usage error is one
 * line on stderr with exit 2. docs/cli.md's synopses and exit codes agree with the help.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { editDistance, suggestion } from '../../src/cli/argv.js';
import { SUBCOMMANDS } from '../../src/commands/index.js';
import { cli } from './agent.js';


const names = Object.keys(SUBCOMMANDS);

describe('bootstate SUBCOMMAND --help', () => {
  it.each(names)('%s --help exits 0 and describes every option it accepts', async (name) => {
    const run = await cli([name, '--help']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(new RegExp(`^Usage: bootstate ${name}\\b`));
    for (const [option, spec] of Object.entries(SUBCOMMANDS[name].options)) {
      const flag = `--${option}${spec.value ? ` ${spec.value}` : ''}`;
      const row = run.stdout.split('\n').find((line) => /^ {2}(-\w, | {4})--/.test(line) && line.includes(`${flag} `));
      expect(row, `--${option}`).toBeDefined();
      expect(row).toContain(spec.help);
    }
    expect(run.stdout).toContain('--help');
    expect((await cli(['help', name])).stdout).toBe(run.stdout);
  });

  it('bootstate --help lists every subcommand and the exit codes', async () => {
    const run = await cli(['--help']);
    expect(run.code).toBe(0);
    for (const name of names) expect(run.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    for (const code of ['0', '1', '2', '78']) expect(run.stdout).toMatch(new RegExp(`^  ${code} +\\S`, 'm'));
  });
});

describe('usage errors: one line on stderr, exit 2', () => {
  const cases: Array<[string[], RegExp]> = [
    [['provison'], /^bootstate: unknown subcommand 'provison'; did you mean 'provision'\?/],
    [['moniter', '--once'], /did you mean 'monitor'\?/],
    [['frobnicate'], /^bootstate: unknown subcommand 'frobnicate' \(see 'bootstate --help'\)$/],
    [['inspect-server', '--port', 'abc'], /^bootstate inspect-server: --port must be a port number 0\.\.65535, not 'abc'/],
    [['inspect-server', '--port', '70000'], /--port must be a port number/],
    [['inspect-server', '--host', '0.0.0.0'], /not a loopback address.*--allow-remote/],
    [['graph', '--format', 'png'], /^bootstate graph: --format must be one of dot, mermaid, svg, html, not 'png'/],
    [['graph', '--machine', 'provisoning'], /did you mean 'provisioning'\?/],
    [['--version', '--foo'], /^bootstate: unexpected argument '--foo' after --version/],
    [['--help', 'extra'], /unexpected argument 'extra'/],
    [['clean', '--bogus'], /^bootstate clean: unknown option '--bogus'/],
    [['monitor', '--onse'], /unknown option '--onse'; did you mean '--once'\?/],
    [['provision', '--config'], /^bootstate provision: option '--config' needs a value/],
    [['--dry-run'], /^bootstate provision: option '--dry-run' needs a value/],
    [['clean', '--logs=yes'], /option '--logs' takes no value/],
    [['report'], /^bootstate report: missing argument ready\|in-progress\|failure/],
    [['report', 'reddy'], /unknown argument 'reddy', expected one of ready, in-progress, failure; did you mean 'ready'\?/],
    [['report', 'ready', 'now'], /unexpected argument 'now'/],
    [['report', 'failure'], /a failure report needs --reason TEXT/],
    [['report', 'ready', '--reason', 'x'], /--reason applies only to a failure report/],
    [['trace', 'a', 'b'], /unexpected argument 'b'/],
    [['demo', 'now'], /unexpected argument 'now'/],
    [['kvp', 'frobnicate'], /^bootstate kvp: unknown command 'frobnicate'/],
    [['kvp', 'dump', '--pool', 'x'], /--pool must be 0\.\.4/],
  ];
  it.each(cases)('%j', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    const lines = run.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(message);
    expect(lines[0]).not.toMatch(/Error:|ERR_|at .*\.mjs|\[\[/);
  });
});

describe('nearest-subcommand suggestion', () => {
  it('counts a swap of two neighbours as one edit and suggests only near words', () => {
    expect(editDistance('porvision', 'provision')).toBe(1);
    expect(editDistance('kvp', 'kvp')).toBe(0);
    expect(suggestion('tarce', names)).toBe("; did you mean 'trace'?");
    expect(suggestion('inspect', names)).toBe("; did you mean 'inspect-server'?");
    expect(suggestion('xyz', names)).toBe('');
  });
});

describe('docs/cli.md agrees with the help', () => {
  const cliSection = readFileSync('docs/cli.md', 'utf8');

  it('gives every subcommand a synopsis naming every option in its CLI section', () => {
    const block = cliSection.slice(cliSection.indexOf('```'), cliSection.indexOf('```', cliSection.indexOf('```') + 3));
    const synopses = new Map(block.split(/\n(?=bootstate )/).map((entry) => [/^bootstate ([a-z-]+)/.exec(entry)?.[1], entry]));
    for (const [name, spec] of Object.entries(SUBCOMMANDS)) {
      const synopsis = synopses.get(name);
      expect(synopsis, name).toBeDefined();
      for (const option of Object.keys(spec.options)) expect(synopsis, `${name} --${option}`).toMatch(new RegExp(`--${option}\\b`));
    }
  });

  it('lists the same exit codes as bootstate --help', async () => {
    const table = [...cliSection.matchAll(/^\| (\d+) \|/gm)].map((m) => m[1]).sort();
    const help = [...(await cli(['--help'])).stdout.matchAll(/^ {2}(\d+) {2,}/gm)].map((m) => m[1]).sort();
    expect(table).toEqual(help);
  });
});
