/**
 * The charts under mutation and, for each, the check that must fail on a wrong transition: its model paths and
 * the oracle's own paths, each compared step by step with the oracle written from the protocol.
 */
import type { AnyStateMachine } from 'xstate';
import { monitorMachine } from '../../machines/monitor.js';
import { provisioningMachine } from '../../machines/provisioning.js';
import { reportMachine } from '../../machines/report.js';
import { firstDisagreement as provisioningDisagreement } from '../model/check.js';
import { firstDisagreement as monitorDisagreement } from '../monitor/check.js';
import { firstDisagreement as reportDisagreement } from '../report/check.js';

export interface Disagreement {
  path: string;
  message: string;
}

export interface Chart {
  name: 'provisioning' | 'monitor' | 'report';
  file: string;
  machine: AnyStateMachine;
  /** The first path on which `machine` does not do what the oracle says, or null. */
  check(machine: AnyStateMachine): Promise<Disagreement | null>;
}

export const CHARTS: Chart[] = [
  { name: 'provisioning', file: 'machines/provisioning.ts', machine: provisioningMachine as unknown as AnyStateMachine, check: provisioningDisagreement },
  { name: 'monitor', file: 'machines/monitor.ts', machine: monitorMachine as unknown as AnyStateMachine, check: monitorDisagreement },
  { name: 'report', file: 'machines/report.ts', machine: reportMachine as unknown as AnyStateMachine, check: reportDisagreement },
];
