/**
 * The charts under mutation and, for each, the paths that must expose a wrong transition: paths that do not depend
 * on the chart (the oracle's own, and the real chart's model paths), and the mutant's own model paths, each compared
 * step by step with the oracle written from the protocol.
 */
import type { AnyStateMachine } from 'xstate';
import { monitorMachine } from '../../machines/monitor.js';
import { provisioningMachine } from '../../machines/provisioning-machine.js';
import { networkMachine } from '../../machines/network.js';
import { reportMachine } from '../../machines/report.js';
import * as provisioning from '../model/check.js';
import * as monitor from '../monitor/check.js';
import * as report from '../report/check.js';
import * as network from '../network/check.js';

export interface CheckPath {
  /** Stable across runs while the path exists: what the kill-set records. */
  id: string;
  name: string;
  /** Throws, naming the first difference, unless `machine` shows the world what the oracle expects on this path. */
  play(machine: AnyStateMachine): Promise<void>;
}

export interface Chart {
  name: 'provisioning' | 'monitor' | 'report' | 'network';
  file: string;
  machine: AnyStateMachine;
  /** Paths that do not depend on the chart under test, computed once. */
  fixedPaths(): Promise<CheckPath[]>;
  /** The shortest paths of `machine` itself. */
  ownPaths(machine: AnyStateMachine): CheckPath[];
}

export const CHARTS: Chart[] = [
  {
    name: 'provisioning',
    file: 'machines/provisioning.ts',
    machine: provisioningMachine as unknown as AnyStateMachine,
    fixedPaths: provisioning.fixedPaths,
    ownPaths: provisioning.ownPaths,
  },
  { name: 'monitor', file: 'machines/monitor.ts', machine: monitorMachine as unknown as AnyStateMachine, fixedPaths: monitor.fixedPaths, ownPaths: monitor.ownPaths },
  { name: 'report', file: 'machines/report.ts', machine: reportMachine as unknown as AnyStateMachine, fixedPaths: report.fixedPaths, ownPaths: () => [] },
  { name: 'network', file: 'machines/network.ts', machine: networkMachine as unknown as AnyStateMachine, fixedPaths: network.fixedPaths, ownPaths: () => [] },
];
