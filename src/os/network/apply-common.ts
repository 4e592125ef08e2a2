/**
 * What every stack's live apply shares: running one command with a timeout and turning its failure into a
 * warning (never an exception), an outcome collected per interface, and the primary NIC's own live changes.
 *
 * The primary NIC is never reconfigured through its stack while the VM runs: a stack that reconfigures a link
 * drops its DHCP lease first (systemd-networkd 252 deletes eth0's address and sends a new DISCOVER on
 * `networkctl reload` once eth0's .network changed; see network-apply notes in apply.ts). Its secondary addresses
 * are added with `ip addr add` beside the lease, and its default route's metric with a second route, so nothing
 * is taken away; the stack's files carry the same settings from the next boot on.
 */
import { firstLine } from '../../system/exec.js';
import type { Address, ApplyDeps, ApplyOutcome, BoundNic } from './types.js';

/** How long one command of a live apply may take before it counts as failed. */
export const COMMAND_TIMEOUT_MS = 30_000;

/** Runs `argv`; null when it exited 0, else why not, in one line (missing command, exit status, timeout). */
export async function attempt(deps: ApplyDeps, argv: string[], timeoutMs = COMMAND_TIMEOUT_MS): Promise<string | null> {
  try {
    const result = await deps.run(argv, { timeoutMs, allowFailure: true });
    if (result.exitCode === 0) return null;
    const why = firstLine(result.stderr) || firstLine(result.stdout);
    return `${argv.join(' ')} exited with ${result.exitCode ?? result.signal}${why ? `: ${why}` : ''}`;
  } catch (error) {
    return `${argv.join(' ')}: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** Runs `argv` and returns its stdout, or null when it failed (read-only queries: `ip -o addr`, `networkctl list`). */
export async function query(deps: ApplyDeps, argv: string[]): Promise<string | null> {
  try {
    const result = await deps.run(argv, { timeoutMs: COMMAND_TIMEOUT_MS, allowFailure: true });
    return result.exitCode === 0 ? result.stdout : null;
  } catch {
    return null;
  }
}

/** An outcome being collected: an interface is applied unless it got a warning. */
export class Outcome {
  readonly warnings: ApplyOutcome['warnings'] = [];
  readonly #applied = new Set<string>();

  constructor(private readonly deps: ApplyDeps) {}

  applied(name: string): void {
    this.#applied.add(name);
  }

  warn(name: string, message: string): void {
    this.warnings.push({ interface: name, message });
    this.deps.log.warn({ interface: name }, message);
  }

  result(): ApplyOutcome {
    const warned = new Set(this.warnings.map((w) => w.interface));
    return { applied: [...this.#applied].filter((name) => !warned.has(name)), warnings: this.warnings };
  }
}

/** One address as `ip -o addr show` lists it, with the flags the primary's live changes look at. */
export interface LiveAddress {
  cidr: string;
  dynamic: boolean;
}

/** The addresses `ip -o addr show dev NAME` lists (link-local left out); null when `ip` failed. */
export async function liveAddresses(deps: ApplyDeps, name: string): Promise<LiveAddress[] | null> {
  const out = await query(deps, ['ip', '-o', 'addr', 'show', 'dev', name]);
  if (out === null) return null;
  return [...out.matchAll(/\binet6?\s+(\S+)([^\n]*)/g)]
    .filter((m) => !m[1]!.startsWith('fe80:'))
    .map((m) => ({ cidr: m[1]!, dynamic: /\bdynamic\b/.test(m[2]!) }));
}

const cidr = (a: Address) => `${a.address}/${a.prefix}`;

/**
 * Adds the primary's static addresses it lacks and, when its best default route has a higher metric than the plan's,
 * a default route via the same gateway with the plan's metric. `stale`: addresses bootstate's earlier file for the
 * primary listed and the plan does not any more; each goes only when the live one is not a DHCP lease's (dynamic).
 */
export async function applyPrimaryLive(primary: BoundNic, deps: ApplyDeps, outcome: Outcome, stale: Address[] = []): Promise<void> {
  const name = primary.name;
  const live = await liveAddresses(deps, name);
  if (live === null) {
    outcome.warn(name, `cannot list ${name}'s addresses (ip -o addr show dev ${name} failed): its secondary addresses come with the next boot`);
    return;
  }
  const have = new Set(live.map((a) => a.cidr));
  for (const address of [...primary.static4, ...primary.static6]) {
    if (have.has(cidr(address))) continue;
    // `brd +` for IPv4: the broadcast address networkd would set. An address of ours without it (broadcast 0) that
    // the primary's .network also lists makes networkd's next start fail on the link with ERANGE and leave it
    // without a DHCP client (seen with systemd 252 on `systemctl restart systemd-networkd` after this step).
    const broadcast = address.address.includes(':') ? [] : ['brd', '+'];
    const failed = await attempt(deps, ['ip', 'addr', 'add', cidr(address), ...broadcast, 'dev', name]);
    if (failed) outcome.warn(name, failed);
  }
  const wanted = new Set([...primary.static4, ...primary.static6].map(cidr));
  // A lease kept by the stack past its expiry (networkd's KeepConfiguration=dhcp) is not flagged dynamic, but routes
  // name it as their source: such an address is never one to take away.
  const sources = new Set([...((await query(deps, ['ip', 'route', 'show', 'dev', name])) ?? '').matchAll(/\bsrc (\S+)/g)].map((m) => m[1]));
  for (const address of stale.map(cidr)) {
    const found = live.find((a) => a.cidr === address);
    if (!found || found.dynamic || wanted.has(address) || sources.has(address.split('/')[0])) continue;
    const failed = await attempt(deps, ['ip', 'addr', 'del', address, 'dev', name]);
    if (failed) outcome.warn(name, failed);
  }
  await preferPrimaryRoute(primary, deps, outcome);
  outcome.applied(name);
}

/** Adds a default route with the plan's metric beside the primary's own when all of its own have a higher one. */
async function preferPrimaryRoute(primary: BoundNic, deps: ApplyDeps, outcome: Outcome): Promise<void> {
  const out = await query(deps, ['ip', '-4', 'route', 'show', 'default', 'dev', primary.name]);
  if (out === null) return;
  const routes = [...out.matchAll(/^default via (\S+)(?:.*\bmetric (\d+))?/gm)].map((m) => ({ via: m[1]!, metric: Number(m[2] ?? 0) }));
  if (routes.length === 0 || routes.some((r) => r.metric <= primary.metric)) return;
  const failed = await attempt(deps, ['ip', 'route', 'add', 'default', 'via', routes[0]!.via, 'dev', primary.name, 'metric', String(primary.metric)]);
  if (failed) outcome.warn(primary.name, failed);
}

/** The addresses (`10.0.0.5/24`, `fd00::5/64`) a file of bootstate's text names: what its stale-address check compares. */
export function addressesIn(text: string): Address[] {
  const found = text.match(/\b(?:\d{1,3}\.){3}\d{1,3}\/\d{1,2}\b|(?<![\w:])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}\/\d{1,3}\b/gi) ?? [];
  return found.map((s) => {
    const [address = '', prefix = ''] = s.split('/');
    return { address: address.toLowerCase(), prefix: Number(prefix) };
  });
}
