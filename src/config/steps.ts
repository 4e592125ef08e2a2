/**
 * `provision --only a,b` and `--skip c`: which OS steps a run leaves out, and why. The chart reads the result from
 * `[steps] skip`; the runner logs each skipped step with its reason.
 */
import { STEP_NAMES, type StepName } from './defaults.js';

export interface StepSelection {
  skip: StepName[];
  /** Why each step is skipped, for the log: `--only hostname,user`, `--skip sshd`. */
  why: Partial<Record<StepName, string>>;
}

function names(flags: string[] | undefined, flag: string): StepName[] | undefined {
  if (flags === undefined) return undefined;
  const list = flags.flatMap((f) => f.split(',')).map((s) => s.trim()).filter(Boolean);
  for (const name of list) {
    if (!(STEP_NAMES as readonly string[]).includes(name)) {
      throw new TypeError(`${flag}: unknown step ${JSON.stringify(name)}; steps are ${STEP_NAMES.join(', ')}`);
    }
  }
  return list as StepName[];
}

/**
 * Resolves the two flags (each may repeat and take comma lists) into the steps to skip.
 *
 * @example
 *   selectSteps(['hostname,user'], undefined).skip // ['password', 'ssh-keys', 'sshd', 'host-keys', 'custom-data', 'resource-disk']
 * @throws TypeError for an unknown step name (the CLI answers it as a usage error, exit 2).
 */
export function selectSteps(only: string[] | undefined, skip: string[] | undefined): StepSelection {
  const onlyNames = names(only, '--only');
  const skipNames = names(skip, '--skip') ?? [];
  const why: StepSelection['why'] = {};
  if (onlyNames) for (const step of STEP_NAMES) if (!onlyNames.includes(step)) why[step] = `--only ${onlyNames.join(',')}`;
  for (const step of skipNames) why[step] ??= `--skip ${skipNames.join(',')}`;
  return { skip: STEP_NAMES.filter((s) => why[s] !== undefined), why };
}
