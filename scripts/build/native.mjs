// Compiles src/system/native.c into build/native/native-<arch>.node for x64 and arm64 with the C compilers at hand
// (cc for this machine; Debian's gcc-x86-64-linux-gnu / gcc-aarch64-linux-gnu cross compilers for the other).
// N-API needs only Node's headers, no linking against node, so a plain compiler call does what node-gyp would.
// An architecture with no compiler is skipped with a note: bootstate then falls back to flock(1) and systemd-notify(1) there.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { arch } from 'node:os';
import { dirname, join } from 'node:path';
import { root } from './bundle.mjs';

export const NATIVE_DIR = join(root, 'build/native');
export const ARCHES = ['x64', 'arm64'];

const TRIPLES = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

function compilerFor(target) {
  const candidates = target === arch() ? ['cc', `${TRIPLES[target]}-gcc`] : [`${TRIPLES[target]}-gcc`];
  return candidates.find((cc) => spawnSync(cc, ['--version'], { stdio: 'ignore' }).status === 0);
}

function nodeHeaders() {
  const dirs = [
    join(dirname(process.execPath), '../include/node'),
    join(process.env.HOME ?? '/root', `.cache/node-gyp/${process.versions.node}/include/node`),
    '/usr/include/node',
    // Node-API is ABI-stable, so the headers of the node-api-headers package serve any Node when this one came
    // without its own (Debian's nodejs keeps them in libnode-dev; a copied binary has none).
    join(root, 'node_modules/node-api-headers/include'),
  ];
  return dirs.find((dir) => existsSync(join(dir, 'node_api.h'))) ?? null;
}

/** Builds every architecture it can; returns { arch: bytes } for those built. */
export function buildNativeAddons() {
  mkdirSync(NATIVE_DIR, { recursive: true });
  const include = nodeHeaders();
  const built = {};
  if (!include) {
    process.stderr.write("build-native: Node's headers (node_api.h) not found; bootstate uses flock(1) and systemd-notify(1) instead of the addon\n");
    return built;
  }
  for (const target of ARCHES) {
    const cc = compilerFor(target);
    if (!cc) {
      process.stderr.write(`build-native: no C compiler for ${target} (apt-get install gcc-${TRIPLES[target].replace(/_/g, '-')}); bootstate uses flock(1) and systemd-notify(1) there\n`);
      continue;
    }
    const out = join(NATIVE_DIR, `native-${target}.node`);
    execFileSync(cc, ['-Os', '-s', '-shared', '-fPIC', '-fvisibility=hidden', '-Wall', '-Werror', '-I', include, '-o', out, join(root, 'src/system/native.c')], { stdio: 'inherit' });
    built[target] = readFileSync(out);
  }
  return built;
}

if (process.argv[1] === new URL(import.meta.url).pathname) buildNativeAddons();
