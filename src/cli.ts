/**
 * The `bootstate` command: parses argv, runs one subcommand, exits with its code. Thin on purpose — each
 * subcommand lives in its own module and everything but `provision` is loaded only when asked for.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { EXIT_FAILURE, EXIT_OK } from './errors.js';
import { VERSION } from './version.js';

const USAGE = `bootstate ${VERSION} — first-boot provisioning agent for Linux VMs on Azure

Usage:
  bootstate [provision] [--config FILE|DIR] [--groups a,b] [--dry-run DIR] [--inspect ws://HOST:PORT]
  bootstate clean [--logs] [--config FILE|DIR]
  bootstate report ready|in-progress|failure [--reason TEXT] [--config FILE|DIR]
  bootstate monitor [--once] [--config FILE|DIR] [--inspect ws://HOST:PORT]
  bootstate kvp info|dump|entries|read KEY|write KEY VALUE [--append]|delete KEY|clear [--if-stale]|is-stale
                [--pool N] [--dir DIR] [--file PATH] [--json]
  bootstate graph [--machine provisioning|monitor] [--format dot|mermaid|svg|html] [-o FILE]
  bootstate trace [JOURNAL] [-o FILE] [--config FILE|DIR]
  bootstate inspect-server [--host 127.0.0.1] [--port 8787]
  bootstate demo
  bootstate --version | --help

Exit codes: 0 success or already provisioned; 78 bad configuration or bad input from metadata; 1 other failure.
`;

const SUBCOMMANDS = new Set(['provision', 'clean', 'report', 'monitor', 'kvp', 'graph', 'trace', 'inspect-server', 'demo', 'help']);

/** Runs the CLI with `argv` (without node and script) and resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const first = argv[0];
  if (first === '--version' || first === '-V') {
    process.stdout.write(`bootstate ${VERSION}\n`);
    return EXIT_OK;
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    process.stdout.write(USAGE);
    return EXIT_OK;
  }
  const command = first !== undefined && SUBCOMMANDS.has(first) ? first : 'provision';
  const rest = command === first ? argv.slice(1) : argv;
  try {
    switch (command) {
      case 'provision':
        return await provision(rest);
      case 'kvp': {
        const { runKvpCommand } = await import('./kvp/cli.js');
        return await runKvpCommand(rest, { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) });
      }
      default: {
        const { runSubcommand } = await import('./commands.js');
        return await runSubcommand(command, rest);
      }
    }
  } catch (error) {
    const e = error as { code?: string; message?: string };
    if (e?.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || e?.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' || e?.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      process.stderr.write(`bootstate: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    process.stderr.write(`bootstate: ${e?.message ?? String(error)}\n`);
    return EXIT_FAILURE;
  }
}

/** `--groups a,b --groups c` and `BOOTSTATE_USER_GROUPS=a,b` (the flag wins) → `['a','b','c']`. */
export function parseGroups(flags: string[] | undefined, env: string | undefined): string[] {
  const raw = flags && flags.length > 0 ? flags : env ? [env] : [];
  return raw.flatMap((g) => g.split(',')).map((g) => g.trim()).filter(Boolean);
}

async function provision(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      config: { type: 'string' },
      groups: { type: 'string', short: 'g', multiple: true },
      'dry-run': { type: 'string' },
      inspect: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const { runProvision } = await import('./provision.js');
  const result = await runProvision({
    configPath: values.config,
    groups: parseGroups(values.groups, process.env.BOOTSTATE_USER_GROUPS),
    dryRunDir: values['dry-run'],
    inspectUrl: values.inspect,
    handleSignals: true,
  });
  return result.exitCode;
}

/** True when this module is the program (the bundle, the single executable, or `tsx src/cli.ts`), not an import. */
function isEntry(): boolean {
  try {
    if ((require('node:sea') as { isSea(): boolean }).isSea()) return true;
  } catch {
    // not a single executable, or no require in this module system
  }
  const entry = process.argv[1];
  if (!entry || typeof import.meta?.url !== 'string') return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntry()) {
  // `bootstate kvp dump | head` closes the pipe early; that is not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
  });
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`bootstate: fatal: ${(error as Error)?.stack ?? String(error)}\n`);
      process.exit(EXIT_FAILURE);
    },
  );
}
