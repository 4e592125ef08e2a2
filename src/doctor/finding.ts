/** What `doctor` reports: one finding per problem, each saying what is wrong, where, and what to change. */
import type { Config } from '../config/defaults.js';

export interface Finding {
  /** Stable identifier, e.g. `cloud-init-azure`. */
  id: string;
  /** `breaks`: a first boot would fail or be provisioned twice; `warns`: it works, with less than it should. */
  severity: 'breaks' | 'warns';
  problem: string;
  fix: string;
}

/** One check of an image under `root` (`/` for the running system): its finding, or null when all is well. */
export type Check = (root: string, config: Config) => Promise<Finding | null>;
