#!/usr/bin/env node
// `npm test`'s pretest step: makes sure the Debian packages the suite needs (scripts/test-packages.txt) are
// installed. As root it installs the missing ones, saying which, without starting their services; as another user
// it stops with the one command to run. Off Linux there is nothing to do: the tests that need these tools need
// Linux and root anyway.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const LIST = join(dirname(fileURLToPath(import.meta.url)), 'test-packages.txt');
const SBIN = ['/usr/local/sbin', '/usr/sbin', '/sbin'];
const POLICY = '/usr/sbin/policy-rc.d';

/** `[command, package]` pairs from the list, comments and blank lines skipped. */
export function readList(text) {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.split(/\s+/))
    .map(([command, pkg]) => [command, pkg ?? command]);
}

function onPath(command) {
  // A file the package ships (fonts have no command) proves it by existing.
  if (command.startsWith('/')) return existsSync(command);
  for (const dir of [...(process.env.PATH ?? '').split(delimiter), ...SBIN]) {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

/** The packages whose proving command is missing, each once, in list order. */
export function missingPackages(list, has = onPath) {
  return [...new Set(list.filter(([command]) => !has(command)).map(([, pkg]) => pkg))];
}

function run(argv, env = process.env) {
  const result = spawnSync(argv[0], argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit'], env });
  if (result.status !== 0) {
    process.stderr.write(`pretest: '${argv.join(' ')}' failed (${result.error?.message ?? `exit ${result.status}`})\n`);
    process.exit(1);
  }
}

/** As root the namespace tests run; they need unshare(1) to work here, which a container may forbid. */
function checkNamespaces() {
  if (process.getuid?.() !== 0) return;
  const probe = spawnSync('unshare', ['-mnu', 'true'], { stdio: 'ignore' });
  if (probe.status !== 0) {
    process.stderr.write('pretest: running as root but unshare(1) cannot create namespaces here; the namespace tests need them\n');
    process.exit(1);
  }
}

function main() {
  if (process.platform !== 'linux') return;
  const missing = missingPackages(readList(readFileSync(LIST, 'utf8')));
  if (missing.length === 0) return checkNamespaces();
  const install = `apt-get install -y --no-install-recommends ${missing.join(' ')}`;
  if (process.getuid?.() !== 0) {
    process.stderr.write(`pretest: the tests need Debian packages that are not installed: ${missing.join(', ')}\n`);
    process.stderr.write(`pretest: install them (then run npm test again) with:\n  sudo sh -c 'apt-get update && ${install}'\n`);
    process.exit(1);
  }
  if (!onPath('apt-get')) {
    process.stderr.write(`pretest: missing ${missing.join(', ')} and no apt-get to install them with; install them and run npm test again\n`);
    process.exit(1);
  }
  process.stdout.write(`pretest: installing the Debian packages the tests need: ${missing.join(' ')}\n`);
  // Installing openssh-server must not start sshd on this machine: policy-rc.d exit 101 forbids every service start.
  const ownPolicy = !existsSync(POLICY);
  if (ownPolicy) writeFileSync(POLICY, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    run(['apt-get', 'update', '-qq'], env);
    run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...missing], env);
  } finally {
    if (ownPolicy) rmSync(POLICY, { force: true });
  }
  const still = missingPackages(readList(readFileSync(LIST, 'utf8')));
  if (still.length > 0) {
    process.stderr.write(`pretest: still missing after apt-get install: ${still.join(', ')}\n`);
    process.exit(1);
  }
  process.stdout.write(`pretest: installed ${missing.join(' ')}\n`);
  checkNamespaces();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
