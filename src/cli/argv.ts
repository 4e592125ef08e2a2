/**
 * Parses one subcommand's argv against its table entry (`SubcommandSpec`) and renders its help, so a subcommand or
 * an option is added by writing one entry with its help text. Usage errors are `UsageError`s: one line, exit 2.
 */
import { parseArgs } from 'node:util';

export interface OptionSpec {
  /** Placeholder of the value in help (`FILE`); absent for a flag. */
  value?: string;
  short?: string;
  multiple?: boolean;
  /** The only accepted values. */
  choices?: readonly string[];
  /** `port`: an integer 0..65535; `count`: an integer ≥ 1. */
  kind?: 'port' | 'count';
  default?: string;
  help: string;
}

export interface SubcommandSpec {
  /** One line for the command list. */
  summary: string;
  /** Positional synopsis shown after the name, e.g. `ready|in-progress|failure`. */
  args?: string;
  /** Accepted number of positionals (default none) and, when fixed, the accepted first positional. */
  positionals?: { min: number; max: number; choices?: readonly string[] };
  options: Record<string, OptionSpec>;
  /** Further help text (sub-commands, examples), printed after the options. */
  notes?: string;
  /** The module parses its own argv (its commands have their own arities); `--help` still comes from here. */
  ownArgv?: boolean;
  /**
   * The exit code when writing its own stdout or stderr fails (a closed pipe, EIO), at once. Without it, a closed
   * stdout ends the command with 0 (`bootstate kvp dump | head` is not an error) and other errors are ignored.
   */
  outputErrorExit?: number;
  run(args: ParsedArgs): Promise<number>;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  /** The raw argv after the subcommand's name (for `ownArgv` subcommands). */
  argv: string[];
}

/** A command line the CLI cannot run: printed as one line naming the problem, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const EXIT_USAGE = 2;

const HELP_OPTION: OptionSpec = { short: 'h', help: 'show this help and exit' };

/** Parses `argv` for subcommand `name`; throws UsageError on anything the spec does not accept. */
export function parseSubcommand(name: string, spec: SubcommandSpec, argv: string[]): ParsedArgs & { help: boolean } {
  if (spec.ownArgv) {
    const help = argv.includes('--help') || argv.includes('-h');
    return { values: {}, positionals: [], argv, help };
  }
  const options = { ...spec.options, help: HELP_OPTION };
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: true,
      options: Object.fromEntries(
        Object.entries(options).map(([key, o]) => [
          key,
          {
            type: o.value ? ('string' as const) : ('boolean' as const),
            ...(o.short ? { short: o.short } : {}),
            ...(o.multiple ? { multiple: true } : {}),
            ...(o.default !== undefined ? { default: o.default } : {}),
          },
        ]),
      ),
    });
  } catch (error) {
    throw new UsageError(describeParseError(error, Object.keys(options)));
  }
  const values = parsed.values as ParsedArgs['values'];
  if (values.help) return { values, positionals: parsed.positionals, argv, help: true };
  for (const [key, option] of Object.entries(spec.options)) checkValue(key, option, values[key]);
  const { min, max, choices } = spec.positionals ?? { min: 0, max: 0 };
  const positionals = parsed.positionals;
  if (positionals.length > max) {
    throw new UsageError(`unexpected argument '${positionals[max]}'`);
  }
  if (positionals.length < min) throw new UsageError(`missing argument ${spec.args ?? ''}`.trim());
  if (choices && positionals[0] !== undefined && !choices.includes(positionals[0])) {
    throw new UsageError(`unknown argument '${positionals[0]}', expected one of ${choices.join(', ')}${suggestion(positionals[0], choices)}`);
  }
  return { values, positionals, argv, help: false };
}

function checkValue(key: string, option: OptionSpec, value: ParsedArgs['values'][string]): void {
  if (typeof value !== 'string') return;
  if (option.choices && !option.choices.includes(value)) {
    throw new UsageError(`--${key} must be one of ${option.choices.join(', ')}, not '${value}'${suggestion(value, option.choices)}`);
  }
  if (option.kind === 'port' && !(/^\d{1,5}$/.test(value) && Number(value) <= 65535)) {
    throw new UsageError(`--${key} must be a port number 0..65535, not '${value}'`);
  }
  if (option.kind === 'count' && !(/^\d{1,9}$/.test(value) && Number(value) >= 1)) {
    throw new UsageError(`--${key} must be a whole number ≥ 1, not '${value}'`);
  }
}

/** Node's parseArgs messages are long and mention its own API; this says the same in one line. */
export function describeParseError(error: unknown, known: string[]): string {
  const e = error as { code?: string; message?: string };
  const quoted = /'([^']+)'/.exec(e.message ?? '')?.[1] ?? '';
  const option = quoted.split(' ')[0];
  switch (e.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option '${option}'${suggestion(option.replace(/^-+/, ''), known, '--')}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /argument missing/.test(e.message ?? '') ? `option '${option.replace(/^-[^-] , /, '')}' needs a value` : `option '${option}' takes no value`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument '${quoted}'`;
    default:
      return e.message ?? String(error);
  }
}

/** `; did you mean 'X'?` for the nearest candidate within two edits (or a prefix), else ''. */
export function suggestion(word: string, candidates: readonly string[], prefix = ''): string {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = candidate.startsWith(word) && word.length >= 2 ? 0.5 : editDistance(word, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best !== undefined && bestDistance <= Math.min(2, Math.max(1, Math.floor(word.length / 3))) ? `; did you mean '${prefix}${best}'?` : '';
}

/** Levenshtein distance with adjacent transpositions (`porvision` is one edit from `provision`). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The one-line synopsis of a subcommand, as in the overview and docs/cli.md. */
export function synopsis(name: string, spec: SubcommandSpec): string {
  const parts = [`bootstate ${name}`];
  if (spec.args) parts.push(spec.args);
  if (Object.keys(spec.options).length > 0) parts.push('[OPTIONS]');
  return parts.join(' ');
}

/** `bootstate NAME --help`: synopsis, summary, every option with its help, then the notes. */
export function renderHelp(name: string, spec: SubcommandSpec): string {
  const rows = Object.entries({ ...spec.options, help: HELP_OPTION }).map(([key, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${key}${o.value ? ` ${o.value}` : ''}`;
    const extra = [
      o.choices ? `one of: ${o.choices.join(', ')}` : '',
      o.default !== undefined ? `default: ${o.default}` : '',
      o.multiple ? 'may be repeated' : '',
    ].filter(Boolean);
    return [flag, extra.length > 0 ? `${o.help} (${extra.join('; ')})` : o.help] as const;
  });
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  const lines = [`Usage: ${synopsis(name, spec)}`, '', spec.summary, '', 'Options:'];
  for (const [flag, help] of rows) lines.push(`  ${flag.padEnd(width)}${help}`);
  if (spec.notes) lines.push('', spec.notes.trimEnd());
  return `${lines.join('\n')}\n`;
}
