/**
 * The wireserver firewall: only root may open connections to the wireserver, except to its DNS port, so a local
 * user cannot post health reports or fetch the goal state as the VM (WALinuxAgent's OS.EnableFirewall does the
 * same with its own rules). With nft the rules are one table of bootstate's own, `inet bootstate`, replaced as a
 * whole in one transaction; where nft is absent, a chain of its own, `BOOTSTATE` in iptables' `security` table
 * (where WALinuxAgent puts its rules: tools that manage the filter table leave it alone), jumped to from OUTPUT.
 * Nothing else in either tool is touched.
 */
import { isIPv4 } from 'node:net';
import { BootstateError } from '../core/errors.js';
import { isCommandMissing, stderrOf, type Runner } from '../system/exec.js';

export type FirewallTool = 'nft' | 'iptables';

export const NFT_TABLE = 'bootstate';
/** Where bootstate-firewall.service keeps nft's listing of the rules it applied, for the monitor's re-check. */
export const FIREWALL_SNAPSHOT = '/run/bootstate/firewall.nft';
export const IPTABLES_TABLE = 'security';
export const IPTABLES_CHAIN = 'BOOTSTATE';
const DNS_PORT = 53;
const COMMAND_TIMEOUT_MS = 30_000;

/** One nft rule: as written in the ruleset, and as `nft --json` lists it. */
interface NftRule {
  text: string;
  expr: unknown[];
}

function nftRules(address: string): NftRule[] {
  const toWireserver = { match: { op: '==', left: { payload: { protocol: 'ip', field: 'daddr' } }, right: address } };
  return [
    {
      text: `ip daddr ${address} tcp dport ${DNS_PORT} accept`,
      expr: [toWireserver, { match: { op: '==', left: { payload: { protocol: 'tcp', field: 'dport' } }, right: DNS_PORT } }, { accept: null }],
    },
    {
      text: `ip daddr ${address} meta skuid 0 accept`,
      expr: [toWireserver, { match: { op: '==', left: { meta: { key: 'skuid' } }, right: 0 } }, { accept: null }],
    },
    {
      text: `ip daddr ${address} meta l4proto tcp ct state invalid,new drop`,
      expr: [
        toWireserver,
        { match: { op: '==', left: { meta: { key: 'l4proto' } }, right: 'tcp' } },
        { match: { op: 'in', left: { ct: { key: 'state' } }, right: ['invalid', 'new'] } },
        { drop: null },
      ],
    },
  ];
}

/**
 * The script `nft -f -` runs: creating the table first makes the delete succeed when it is absent, so the whole
 * table is replaced in one transaction and a second apply leaves exactly one copy.
 */
export function nftRuleset(address: string): string {
  requireIPv4(address);
  return [
    `table inet ${NFT_TABLE}`,
    `delete table inet ${NFT_TABLE}`,
    `table inet ${NFT_TABLE} {`,
    '\tchain output {',
    '\t\ttype filter hook output priority filter; policy accept;',
    ...nftRules(address).map((rule) => `\t\t${rule.text}`),
    '\t}',
    '}',
    '',
  ].join('\n');
}

/** The rules of the BOOTSTATE chain, each as the arguments after `-A BOOTSTATE`. */
export function iptablesChainRules(): string[][] {
  return [
    ['-p', 'tcp', '-m', 'tcp', '--dport', String(DNS_PORT), '-j', 'ACCEPT'],
    ['-m', 'owner', '--uid-owner', '0', '-j', 'ACCEPT'],
    ['-m', 'conntrack', '--ctstate', 'INVALID,NEW', '-j', 'DROP'],
  ];
}

/** The OUTPUT rule that sends TCP to the wireserver through the BOOTSTATE chain. */
export function iptablesJump(address: string): string[] {
  requireIPv4(address);
  return ['-d', `${address}/32`, '-p', 'tcp', '-j', IPTABLES_CHAIN];
}

/**
 * What `iptables-restore --noflush` reads: declaring a chain that exists flushes it, so the chain is replaced in
 * one commit and the rest of the table stays as it was.
 */
export function iptablesRestoreInput(): string {
  return [
    `*${IPTABLES_TABLE}`,
    `:${IPTABLES_CHAIN} - [0:0]`,
    ...iptablesChainRules().map((rule) => `-A ${IPTABLES_CHAIN} ${rule.join(' ')}`),
    'COMMIT',
    '',
  ].join('\n');
}

function requireIPv4(address: string): void {
  if (!isIPv4(address)) {
    throw new BootstateError('CONFIG_INVALID', `the firewall needs an IPv4 wireserver address, not '${address}'`, { data: [['wireserver_address', address]] });
  }
}

/** The tool the rules are made with: nft where it runs, else iptables, else null. */
export async function firewallTool(run: Runner): Promise<FirewallTool | null> {
  for (const tool of ['nft', 'iptables'] as const) {
    if (await runs(run, [tool, '--version'])) return tool;
  }
  return null;
}

async function runs(run: Runner, argv: string[]): Promise<boolean> {
  try {
    return (await run(argv, { allowFailure: true, timeoutMs: COMMAND_TIMEOUT_MS })).exitCode === 0;
  } catch (error) {
    if (isCommandMissing(error)) return false;
    throw error;
  }
}

/** What `check` found: empty `missing` means every rule is in place. */
export interface FirewallState {
  tool: FirewallTool;
  missing: string[];
}

/** Compares the rules in place with the ones bootstate makes, and says what is missing or different. */
export async function checkFirewall(run: Runner, tool: FirewallTool, address: string): Promise<FirewallState> {
  requireIPv4(address);
  return { tool, missing: tool === 'nft' ? await nftMissing(run, address) : await iptablesMissing(run, address) };
}

/** Puts the rules in place unless they already are; returns whether anything changed. */
export async function applyFirewall(run: Runner, tool: FirewallTool, address: string): Promise<boolean> {
  if ((await checkFirewall(run, tool, address)).missing.length === 0) return false;
  if (tool === 'nft') {
    await exec(run, ['nft', '-f', '-'], nftRuleset(address));
    return true;
  }
  await exec(run, ['iptables-restore', '-w', '--noflush'], iptablesRestoreInput());
  const jump = iptablesJump(address);
  if (!(await runs(run, ['iptables', '-w', '-t', IPTABLES_TABLE, '-C', 'OUTPUT', ...jump]))) {
    await exec(run, ['iptables', '-w', '-t', IPTABLES_TABLE, '-I', 'OUTPUT', '1', ...jump]);
  }
  return true;
}

/** A piece of bootstate's rules found in place, and the commands that remove it. */
export interface FirewallPiece {
  what: string;
  remove: string[][];
}

/**
 * bootstate's rules in whichever tools are present (they may have been made with either), and nothing else: the
 * nft table, each jump to the iptables chain (whatever address it was made for: the chain cannot be deleted while
 * one remains), and the chain. Reads only.
 */
export async function findFirewall(run: Runner): Promise<FirewallPiece[]> {
  const found: FirewallPiece[] = [];
  if (await runs(run, ['nft', '--version'])) {
    const tables = await exec(run, ['nft', 'list', 'tables']);
    if (new RegExp(`^table inet ${NFT_TABLE}$`, 'm').test(tables)) {
      found.push({ what: `nft table inet ${NFT_TABLE}`, remove: [['nft', 'delete', 'table', 'inet', NFT_TABLE]] });
    }
  }
  if (await runs(run, ['iptables', '--version'])) {
    const base = ['iptables', '-w', '-t', IPTABLES_TABLE];
    const output = await exec(run, [...base, '-S', 'OUTPUT']);
    for (const line of output.split('\n')) {
      const words = line.trim().split(/\s+/);
      if (words[0] !== '-A' || words.at(-1) !== IPTABLES_CHAIN || words.at(-2) !== '-j') continue;
      found.push({ what: `iptables -t ${IPTABLES_TABLE} rule: ${words.slice(1).join(' ')}`, remove: [[...base, '-D', ...words.slice(1)]] });
    }
    if (await runs(run, [...base, '-S', IPTABLES_CHAIN])) {
      found.push({ what: `iptables -t ${IPTABLES_TABLE} chain ${IPTABLES_CHAIN}`, remove: [[...base, '-F', IPTABLES_CHAIN], [...base, '-X', IPTABLES_CHAIN]] });
    }
  }
  return found;
}

/** Removes what `findFirewall` found, in its order; returns one line per thing removed. */
export async function removeFirewall(run: Runner, found?: FirewallPiece[]): Promise<string[]> {
  const removed: string[] = [];
  for (const piece of found ?? (await findFirewall(run))) {
    for (const argv of piece.remove) await exec(run, argv);
    removed.push(piece.what);
  }
  return removed;
}

/** The parts of `nft --json list table` (libnftables-json) the check reads. */
interface NftListItem {
  chain?: { name?: string; type?: string; hook?: string; policy?: string };
  rule?: { chain?: string; expr?: unknown[] };
}

/**
 * nft's own listing of bootstate's table, as `nft list table inet bootstate` prints it: what the monitor's re-check
 * (packaging/libexec/firewall-recheck) compares with the kernel's listing, byte for byte.
 */
export async function listNftTable(run: Runner): Promise<string> {
  return exec(run, ['nft', 'list', 'table', 'inet', NFT_TABLE]);
}

async function nftMissing(run: Runner, address: string): Promise<string[]> {
  const tables = await exec(run, ['nft', 'list', 'tables']);
  if (!new RegExp(`^table inet ${NFT_TABLE}$`, 'm').test(tables)) return [`nft table inet ${NFT_TABLE} does not exist`];
  const listed = JSON.parse(await exec(run, ['nft', '--json', 'list', 'table', 'inet', NFT_TABLE])) as { nftables?: NftListItem[] };
  const items = listed.nftables ?? [];
  const chain = items.find((item) => item.chain?.name === 'output')?.chain;
  const missing: string[] = [];
  if (!chain) return [`nft chain inet ${NFT_TABLE} output does not exist`];
  if (chain.type !== 'filter' || chain.hook !== 'output' || chain.policy !== 'accept') {
    missing.push(`nft chain inet ${NFT_TABLE} output is not a filter chain on the output hook with policy accept`);
  }
  const present = items.flatMap((item) => (item.rule?.chain === 'output' ? [JSON.stringify(namedProtocols(item.rule.expr ?? []))] : []));
  const wanted = nftRules(address);
  for (const rule of wanted) {
    if (!present.includes(JSON.stringify(rule.expr))) missing.push(`nft rule missing: ${rule.text}`);
  }
  if (missing.length === 0 && present.join('\n') !== wanted.map((rule) => JSON.stringify(rule.expr)).join('\n')) {
    missing.push(`nft chain inet ${NFT_TABLE} output holds other rules or another order than: ${wanted.map((rule) => rule.text).join('; ')}`);
  }
  return missing;
}

/** nft lists `meta l4proto` by number where /etc/protocols is missing (a minimal root); the rules name it. */
function namedProtocols(expr: unknown[]): unknown[] {
  return expr.map((item) => {
    const match = (item as { match?: { left?: { meta?: { key?: string } }; right?: unknown } }).match;
    return match?.left?.meta?.key === 'l4proto' && match.right === 6 ? { match: { ...match, right: 'tcp' } } : item;
  });
}

async function iptablesMissing(run: Runner, address: string): Promise<string[]> {
  const base = ['iptables', '-w', '-t', IPTABLES_TABLE];
  if (!(await runs(run, [...base, '-S', IPTABLES_CHAIN]))) return [`iptables chain ${IPTABLES_CHAIN} does not exist in the ${IPTABLES_TABLE} table`];
  const missing: string[] = [];
  const jump = iptablesJump(address);
  if (!(await runs(run, [...base, '-C', 'OUTPUT', ...jump]))) missing.push(`iptables rule missing: -t ${IPTABLES_TABLE} -A OUTPUT ${jump.join(' ')}`);
  const rules = iptablesChainRules();
  for (const rule of rules) {
    if (!(await runs(run, [...base, '-C', IPTABLES_CHAIN, ...rule]))) missing.push(`iptables rule missing: -t ${IPTABLES_TABLE} -A ${IPTABLES_CHAIN} ${rule.join(' ')}`);
  }
  const listed = (await exec(run, [...base, '-S', IPTABLES_CHAIN])).split('\n').filter((line) => line.startsWith(`-A ${IPTABLES_CHAIN} `));
  if (missing.length === 0 && listed.length !== rules.length) {
    missing.push(`iptables chain ${IPTABLES_CHAIN} holds ${listed.length} rules, not the ${rules.length} bootstate makes`);
  }
  return missing;
}

/** Runs a command that must succeed; its failure names the command and what it printed. */
async function exec(run: Runner, argv: string[], stdin?: string): Promise<string> {
  try {
    return (await run(argv, { stdin: stdin === undefined ? undefined : Buffer.from(stdin), timeoutMs: COMMAND_TIMEOUT_MS })).stdout;
  } catch (error) {
    throw new BootstateError('SUBPROCESS_FAILED', `${argv.join(' ')}: ${stderrOf(error)}`, { data: [['command', argv.join(' ')]], cause: error });
  }
}
