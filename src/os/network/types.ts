/**
 * The shapes of the network step: what IMDS's `network` section asks for (a plan per NIC), the plan
 * bound to the interfaces this VM has (a NIC lands on its synthetic interface, never on an SR-IOV virtual function
 * with the same MAC), and the one interface every network stack's backend implements.
 */
import type { RunResult } from '../../system/exec.js';

/** An address and its prefix length, as the plan carries it: `10.0.0.5`, 24. */
export interface Address {
  address: string;
  prefix: number;
}

/** What one NIC of IMDS's `network.interface[]` gets, in IMDS's order (index 0 is the primary NIC). */
export interface NicPlan {
  index: number;
  /** `aa:bb:cc:dd:ee:ff`, lower case (IMDS writes `AABBCCDDEEFF`). */
  mac: string;
  primary: boolean;
  /** The DHCPv4 route metric: 100·(index+1), so the primary NIC's default route wins. */
  metric: number;
  /** DNS servers from DHCP: the primary NIC's only. */
  useDns: boolean;
  /** The IPv4 addresses after the first (the first comes by DHCP), with their subnet's prefix (24 when absent). */
  static4: Address[];
  /** DHCPv6 when IMDS lists any IPv6 address on the NIC. */
  dhcp6: boolean;
  /** The IPv6 addresses after the first, with their subnet's prefix (128 when absent). */
  static6: Address[];
}

export interface NetworkPlan {
  nics: NicPlan[];
}

/** Why a `network` section gave no plan, or gave one with something left out: named, never an exception. */
export interface NetworkWarning {
  code:
    | 'NETWORK_MISSING' // the document has no `network.interface` array
    | 'NETWORK_MALFORMED' // the section is there but of the wrong shape as a whole
    | 'NETWORK_EMPTY' // `interface` is an empty array
    | 'NIC_MALFORMED' // one interface left out (bad MAC, no addresses…); the others go on
    | 'ADDRESS_MALFORMED' // one address left out
    | 'DUPLICATE_MAC'; // a second interface with a MAC already listed, left out
  message: string;
}

/** A parsed `network` section: a plan (possibly with warnings), or none and why. */
export type PlanResult = { plan: NetworkPlan; warnings: NetworkWarning[] } | { plan: null; warnings: NetworkWarning[] };

/** A network interface this machine has, as the kernel shows it. */
export interface Link {
  name: string;
  /** `aa:bb:…`, lower case. */
  mac: string;
  /** The driver: /sys/class/net/<name>/device/driver's name, else the rtnetlink link kind (veth, dummy…); null if neither. */
  driver: string | null;
  /** Its master's name when enslaved (a VF under its synthetic NIC), else null. */
  master: string | null;
}

/** A NIC of the plan bound to the interface it lands on (the one with its MAC and a synthetic driver). */
export interface BoundNic extends NicPlan {
  name: string;
  driver: string;
}

export interface BoundPlan {
  nics: BoundNic[];
  /** NICs of the plan with no interface to land on (none with the MAC, or only ones with another driver). */
  unbound: Array<{ nic: NicPlan; why: string }>;
  /** Interfaces left alone because they share a planned NIC's MAC with another driver: SR-IOV VFs (or their stand-ins). */
  virtualFunctions: Link[];
}

export type StackName = 'networkd' | 'netplan' | 'ifupdown' | 'networkmanager';

/** A file a backend writes: always bootstate's own, replaced whole on each boot, never appended to. */
export interface RenderedFile {
  /** Absolute path on the machine (a backend's render never sees a root prefix; the writer adds it). */
  path: string;
  text: string;
  mode: number;
  /** The interface names it configures. */
  interfaces: string[];
}

/** An interface the image already configures in a way that differs from the plan: reported, not fought over. */
export interface ImageConflict {
  interface: string;
  file: string;
  why: string;
}

/** What changed on disk this boot: the writer's answer, the backend's apply's question. */
export interface FileChange {
  written: RenderedFile[];
  /** bootstate's files of an earlier boot that no longer belong (a NIC gone from IMDS), removed. */
  removed: string[];
  /** Files whose content was already what the plan renders. */
  unchanged: string[];
}

export interface ApplyDeps {
  run(argv: string[], options?: { timeoutMs?: number; allowFailure?: boolean }): Promise<RunResult>;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  signal?: AbortSignal;
}

/** What a live apply did, per interface: applied, or a warning (a secondary NIC that did not come up is a warning). */
export interface ApplyOutcome {
  applied: string[];
  warnings: Array<{ interface: string; message: string }>;
}

/** One network stack: how bootstate renders for it, finds its own earlier files and the image's, and applies live. */
export interface NetworkBackend {
  stack: StackName;
  /** bootstate's files of any earlier boot under `root` (absolute paths without the root prefix). */
  ownedFiles(root: string): Promise<string[]>;
  /** The image's own configuration (not bootstate's) of the plan's interfaces that differs from the plan. */
  conflicts(root: string, plan: BoundPlan): Promise<ImageConflict[]>;
  /**
   * Pure: the files for `plan`, leaving out the interfaces in `skip` (conflicts). `declared`: the interfaces the
   * image already declares compatibly (plain DHCP), for a stack that must not declare one twice (ifupdown), which
   * then renders only what the plan adds to them; the other stacks ignore it.
   */
  render(plan: BoundPlan, skip: ReadonlySet<string>, declared?: ReadonlySet<string>): RenderedFile[];
  /** The planned interfaces the image declares compatibly, for `render`'s `declared` (ifupdown only). */
  declared?(root: string, plan: BoundPlan): Promise<Set<string>>;
  /** Makes the written files take effect now, never taking the primary NIC's address away. */
  apply(plan: BoundPlan, change: FileChange, deps: ApplyDeps): Promise<ApplyOutcome>;
}
