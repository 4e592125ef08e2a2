/**
 * Named fabric setups shared by the standalone fake fabric (`serve.ts --scenario`) and the tests, so an e2e
 * run and an integration test mean the same thing by "hostile-username".
 */
import { customerImdsDocument, type FakeFabric } from './fake-fabric.js';
import { exampleImdsDocument, withOsProfile } from './imds-document.js';
import { ovfDocument } from './ovf-document.js';

export const USERNAME_32_BYTES = 'Svc.Provisioning_Agent-User.0123';
const EXAMPLE_KEY = exampleImdsDocument().compute.publicKeys[0].keyData as string;

function withUser(name: string): Record<string, any> {
  const doc = withOsProfile({ adminUsername: name });
  doc.compute.publicKeys[0].path = `/home/${name}/.ssh/authorized_keys`;
  return doc;
}

function withKeys(keyData: string[]): Record<string, any> {
  const doc = exampleImdsDocument();
  doc.compute.publicKeys = keyData.map((k) => ({ keyData: k, path: '/home/azureuser/.ssh/authorized_keys' }));
  return doc;
}

/** What the customer who claims a pool VM gave it: custom data in ovf-env.xml, user data in IMDS. */
export const CUSTOMER_CUSTOM_DATA = Buffer.from('#!/bin/sh\n# custom data of the customer: customdata-e2e-9f3c\necho hello\n');
export const CUSTOMER_USER_DATA = Buffer.from('#cloud-config\n# user data of the customer: userdata-e2e-4b7d\n');

/**
 * A pool VM claimed at poll `claimAtPoll` by a customer who gave custom data and user data. IMDS names the pool
 * type `type`; `None` leaves the provisioning media alone to say that this is a pool VM.
 */
function claimedPool(fabric: FakeFabric, claimAtPoll: number, type = 'Running'): void {
  const document = customerImdsDocument();
  document.compute.userData = CUSTOMER_USER_DATA.toString('base64');
  document.extended.compute.hasCustomData = true;
  fabric.setPreprovisioned({
    type,
    claimAtPoll,
    customerDocument: document,
    customerOvf: ovfDocument({
      username: document.compute.osProfile.adminUsername,
      hostname: document.compute.osProfile.computerName,
      keys: document.compute.publicKeys.map((k: { keyData: string }) => k.keyData),
      customData: CUSTOMER_CUSTOM_DATA,
    }),
  });
}

export const SCENARIOS = {
  /** Everything answers as a healthy fabric does. */
  happy: () => {},
  /** The VM owner allowed password logins. */
  'password-auth': (fabric: FakeFabric) => fabric.setImdsDocument(withOsProfile({ disablePasswordAuthentication: 'false' })),
  /** IMDS refuses every request with 403, which is not retryable. */
  'imds-down': (fabric: FakeFabric) => fabric.setImds({ status: 403, body: { error: 'Forbidden' } }),
  /** The admin user name is an option-injection attempt. */
  'hostile-username': (fabric: FakeFabric) => fabric.setImdsDocument(withOsProfile({ adminUsername: '-oops;rm' })),
  /** Admin user names Azure's API lets through and shadow's useradd creates (upper case, a dot, 32 bytes). */
  'username-azureadmin': (fabric: FakeFabric) => fabric.setImdsDocument(withUser('AzureAdmin')),
  'username-dotted': (fabric: FakeFabric) => fabric.setImdsDocument(withUser('john.doe')),
  'username-32-bytes': (fabric: FakeFabric) => fabric.setImdsDocument(withUser(USERNAME_32_BYTES)),
  /** One valid key, then one that is not base64: the valid one is installed, the other skipped with a warning. */
  'one-invalid-key': (fabric: FakeFabric) =>
    fabric.setImdsDocument(withKeys([EXAMPLE_KEY, 'ssh-rsa AAAA!not-base64 broken@laptop'])),
  /** Only invalid keys and password logins off: the VM would be unreachable. */
  'only-invalid-keys': (fabric: FakeFabric) =>
    fabric.setImdsDocument(withKeys(['ssh-rsa AAAA!not-base64 broken@laptop', 'ssh-dss AAAAB3NzaC1kc3MAAACBAP old@laptop'])),
  /** The computer name carries shell metacharacters, a newline and an over-long label. */
  'hostile-hostname': (fabric: FakeFabric) =>
    fabric.setImdsDocument(withOsProfile({ computerName: `$(reboot)\nweb-01;${'x'.repeat(70)}` })),
  /** A pool VM (PPS Running) that a customer claims at the third poll of reprovisiondata. */
  'pps-running': (fabric: FakeFabric) => claimedPool(fabric, 3),
  /** The same pool VM, claimed only at the sixth poll (room for a reboot while it waits). */
  'pps-running-late': (fabric: FakeFabric) => claimedPool(fabric, 6),
  /** A pool VM that only its provisioning media marks as one (IMDS says ppsType None), claimed at the second poll. */
  'pps-media-only': (fabric: FakeFabric) => claimedPool(fabric, 2, 'None'),
  /** A pool VM that is never claimed (the agent waits until stopped). */
  'pps-unclaimed': (fabric: FakeFabric) => fabric.setPreprovisioned({ type: 'Running' }),
  /** A Savable pool VM, never claimed by itself (a test claims it, e.g. with serve.ts's --claim-when). */
  'pps-savable': (fabric: FakeFabric) => fabric.setPreprovisioned({ type: 'Savable' }),
  /** An OS-disk pool VM, never claimed: the host shuts it down once its Ready has reached the pool. */
  'pps-os-disk': (fabric: FakeFabric) => fabric.setPreprovisioned({ type: 'PreprovisionedOSDisk' }),
  /** IMDS answers every request with its document cut short (valid framing): garbled, asked again until the budget is spent. */
  'imds-truncated': (fabric: FakeFabric) => fabric.setImds('truncated-body'),
  /** IMDS answers 503 to every request, which is retryable: the agent retries until its IMDS budget is spent. */
  'imds-unavailable': (fabric: FakeFabric) => fabric.setImds({ status: 503, body: { error: 'Service Unavailable' } }),
  /** The first three Ready reports get 503 (retryable); the fourth is accepted. */
  'ready-unavailable-3': (fabric: FakeFabric) => {
    let unavailable = 3;
    fabric.setWireserver((request) => {
      if (!request.body.includes('"state":"Ready"') || unavailable === 0) return 'ok';
      unavailable -= 1;
      return { status: 503, body: 'Service Unavailable' };
    });
  },
  /** The first Ready report is refused with 403; later ones are accepted. */
  'ready-rejected-once': (fabric: FakeFabric) => {
    let rejected = false;
    fabric.setWireserver((request) => {
      if (rejected || !request.body.includes('"state":"Ready"')) return 'ok';
      rejected = true;
      return { status: 403, body: 'Forbidden' };
    });
  },
} satisfies Record<string, (fabric: FakeFabric) => void>;

export type ScenarioName = keyof typeof SCENARIOS;

/** Applies a named scenario to a running fabric; throws on an unknown name. */
export function applyScenario(fabric: FakeFabric, name: string): void {
  if (!(name in SCENARIOS)) throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  SCENARIOS[name as ScenarioName](fabric);
}
