/**
 * `bootstate doctor [--root DIR]`: checks an image (or the running system) for what would make two agents
 * provision the same VM or make bootstate ineffective, prints each finding with what to change, and exits 1 when
 * one of them would break a first boot. The .deb runs it at install time. A root that does not exist or is not a
 * directory is a usage error (exit 2): there is no image to look at, and "no findings" would be a lie.
 */
import path from 'node:path';
import { checkRoot } from '../cli/options.js';
import { DEFAULT_CONFIG, SYSTEM_CONFIG_DROPIN_DIR, SYSTEM_CONFIG_FILE, type Config } from '../config/defaults.js';
import { loadConfig } from '../config/load.js';
import { EXIT_FAILURE, EXIT_OK } from '../core/errors.js';
import { bySeverity, inspectImage, type Finding } from '../doctor/findings.js';
import { networkView } from '../doctor/network.js';

const LABEL: Record<Finding['severity'], string> = { breaks: 'BREAKS FIRST BOOT', warns: 'warning', handled: 'handled' };

export interface DoctorIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

/**
 * Runs `doctor` with its parsed options (`--root`) and resolves to the exit code.
 * @throws UsageError when the root does not exist or is not a directory.
 */
export async function runDoctor(values: { root?: string }, io: DoctorIo): Promise<number> {
  const root = path.resolve(values.root ?? '/');
  await checkRoot(root);
  const findings: Finding[] = [];
  let config: Config = DEFAULT_CONFIG;
  try {
    const loaded = await loadConfig({ root, systemFile: SYSTEM_CONFIG_FILE, dropinDir: SYSTEM_CONFIG_DROPIN_DIR, override: '', env: {} });
    config = loaded.config;
    for (const problem of loaded.refused) {
      findings.push({ id: 'config-unreadable', severity: 'breaks', problem: `${problem.replace(/, ignored$/, '')}: a first boot would skip it`, fix: 'make it a regular file (or a link to one inside the image), or remove it' });
    }
    for (const problem of loaded.unknown) findings.push({ id: 'config-unknown-key', severity: 'warns', problem, fix: 'remove it, or check its spelling (bootstate config check)' });
  } catch (error) {
    findings.push({ id: 'config-invalid', severity: 'breaks', problem: (error as Error).message, fix: 'fix the file (bootstate config check shows every problem)' });
  }
  findings.push(...(await inspectImage(root, config)));
  const network = await networkView(root, config);
  if (network) findings.push(...network.findings);
  findings.sort(bySeverity);
  if (findings.length === 0) io.stdout(`bootstate doctor: ${root}: no findings\n`);
  for (const f of findings) {
    io.stdout(`${LABEL[f.severity]} [${f.id}]: ${f.problem}\n  fix: ${f.fix}\n`);
  }
  if (network?.stack) io.stdout(`bootstate doctor: ${root}: the network from IMDS is rendered for ${network.stack}: ${network.why}\n`);
  return findings.some((f) => f.severity === 'breaks') ? EXIT_FAILURE : EXIT_OK;
}
