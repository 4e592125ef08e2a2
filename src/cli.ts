/**
 * The `bootstate` command: finds the subcommand, parses its options against its table entry
 * (`src/commands/index.ts`), runs it and exits with its code. Thin on purpose — each subcommand's module is
 * imported only when that subcommand runs.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EXIT_USAGE, parseSubcommand, renderHelp, suggestion, synopsis, UsageError } from './cli/argv.js';
import { SUBCOMMANDS } from './commands/index.js';
import { EXIT_FAILURE, EXIT_OK } from './core/errors.js';
import { VERSION } from './core/version.js';

export const EXIT_CODES_HELP = `Exit codes:
  0   success: provisioned and Ready accepted, or already provisioned
  1   any other failure (network, deadline, OS command, SIGTERM, another instance running)
  2   usage error
  78  bad configuration, or bad input from the metadata (EX_CONFIG)`;

/** `bootstate --help`: every subcommand with its synopsis and summary. */
export function overview(): string {
  const lines = [
    `bootstate ${VERSION} — first-boot provisioning agent for Linux VMs on Azure`,
    '',
    'Usage: bootstate [SUBCOMMAND] [OPTIONS]   (no subcommand: provision)',
    '       bootstate SUBCOMMAND --help',
    '       bootstate --version',
    '',
    'Subcommands:',
  ];
  const width = Math.max(...Object.keys(SUBCOMMANDS).map((name) => name.length)) + 2;
  for (const [name, spec] of Object.entries(SUBCOMMANDS)) lines.push(`  ${name.padEnd(width)}${spec.summary}`);
  lines.push('', 'Synopsis:');
  for (const [name, spec] of Object.entries(SUBCOMMANDS)) lines.push(`  ${synopsis(name, spec)}`);
  lines.push('', EXIT_CODES_HELP);
  return `${lines.join('\n')}\n`;
}

/** Runs the CLI with `argv` (without node and script) and resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const first = argv[0];
  let name = 'provision';
  let rest = argv;
  try {
    if (first === '--version' || first === '-V' || first === '--help' || first === '-h' || first === 'help') {
      name = '';
      const topic = argv[1];
      if (first === 'help' && topic !== undefined && argv.length === 2) return await main([topic, '--help']);
      if (argv.length > 1) throw new UsageError(`unexpected argument '${argv[1]}' after ${first}`);
      process.stdout.write(first === '--version' || first === '-V' ? `bootstate ${VERSION}\n` : overview());
      return EXIT_OK;
    }
    if (first !== undefined && !first.startsWith('-')) {
      if (!Object.hasOwn(SUBCOMMANDS, first)) {
        name = '';
        throw new UsageError(`unknown subcommand '${first}'${suggestion(first, Object.keys(SUBCOMMANDS))}`);
      }
      name = first;
      rest = argv.slice(1);
    }
    const spec = SUBCOMMANDS[name];
    const parsed = parseSubcommand(name, spec, rest);
    if (parsed.help) {
      process.stdout.write(renderHelp(name, spec));
      return EXIT_OK;
    }
    return await spec.run(parsed);
  } catch (error) {
    if (error instanceof UsageError) {
      const where = name ? `bootstate ${name}` : 'bootstate';
      process.stderr.write(`${where}: ${error.message} (see '${where} --help')\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`bootstate${name ? ` ${name}` : ''}: ${(error as Error)?.message ?? String(error)}\n`);
    return EXIT_FAILURE;
  }
}

/**
 * True when this module is the program run by `tsx src/cli.ts`, not an import. The loader (scripts/build/loader.cjs:
 * dist/bootstate.mjs and the single executable's main script) sets the V8 flags and calls `runAsProgram` itself.
 */
function isEntry(): boolean {
  const entry = process.argv[1];
  if (!entry || typeof import.meta?.url !== 'string') return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

/** Runs the CLI on this process's argv and exits with its code: the program's entry, however it was started. */
export function runAsProgram(): void {
  const argv = process.argv.slice(2);
  const outputErrorExit = Object.hasOwn(SUBCOMMANDS, argv[0] ?? '') ? SUBCOMMANDS[argv[0]!]!.outputErrorExit : undefined;
  if (outputErrorExit === undefined) {
    // `bootstate kvp dump | head` closes the pipe early; that is not an error.
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(0);
    });
  } else {
    for (const stream of [process.stdout, process.stderr]) stream.on('error', () => process.exit(outputErrorExit));
  }
  main(argv).then(
    // A write that failed reports it on a later tick: let it, so its code is never overtaken by the command's own.
    (code) => (outputErrorExit === undefined ? process.exit(code) : setImmediate(() => process.exit(code))),
    (error) => {
      process.stderr.write(`bootstate: fatal: ${(error as Error)?.stack ?? String(error)}\n`);
      process.exit(EXIT_FAILURE);
    },
  );
}

if (isEntry()) runAsProgram();
