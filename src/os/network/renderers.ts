/**
 * The four network stacks' renderers and image readers in one table, by stack name. A backend (types.ts's
 * NetworkBackend) is one of these plus its `apply`, which lives beside it in apply-*.ts.
 */
import type { NetworkBackend, StackName } from './types.js';
import { networkdConflicts, networkdOwnedFiles, renderNetworkd } from './networkd.js';
import { netplanConflicts, netplanOwnedFiles, renderNetplan } from './netplan.js';
import { ifupdownConflicts, ifupdownDeclared, ifupdownOwnedFiles, renderIfupdown } from './ifupdown.js';
import { networkManagerConflicts, networkManagerOwnedFiles, renderNetworkManager } from './networkmanager.js';

/** Everything of a backend but `apply`. */
export type Renderer = Omit<NetworkBackend, 'apply'>;

export const renderers: Readonly<Record<StackName, Renderer>> = {
  networkd: { stack: 'networkd', render: renderNetworkd, conflicts: networkdConflicts, ownedFiles: networkdOwnedFiles },
  netplan: { stack: 'netplan', render: renderNetplan, conflicts: netplanConflicts, ownedFiles: netplanOwnedFiles },
  ifupdown: {
    stack: 'ifupdown',
    render: renderIfupdown,
    conflicts: ifupdownConflicts,
    ownedFiles: ifupdownOwnedFiles,
    declared: ifupdownDeclared,
  },
  networkmanager: {
    stack: 'networkmanager',
    render: renderNetworkManager,
    conflicts: networkManagerConflicts,
    ownedFiles: networkManagerOwnedFiles,
  },
};
