/**
 * Named fabric setups shared by the standalone fake fabric (`serve.ts --scenario`) and the tests, so an e2e
 * run and an integration test mean the same thing by "hostile-username".
 */
import type { FakeFabric } from './fake-fabric.js';
import { withOsProfile } from './imds-document.js';

export const SCENARIOS = {
  /** Everything answers as a healthy fabric does. */
  happy: () => {},
  /** The VM owner allowed password logins. */
  'password-auth': (fabric: FakeFabric) => fabric.setImdsDocument(withOsProfile({ disablePasswordAuthentication: 'false' })),
  /** IMDS refuses every request with 403, which is not retryable. */
  'imds-down': (fabric: FakeFabric) => fabric.setImds({ status: 403, body: { error: 'Forbidden' } }),
  /** The admin user name is an option-injection attempt. */
  'hostile-username': (fabric: FakeFabric) => fabric.setImdsDocument(withOsProfile({ adminUsername: '-oops;rm' })),
  /** The computer name carries shell metacharacters, a newline and an over-long label. */
  'hostile-hostname': (fabric: FakeFabric) =>
    fabric.setImdsDocument(withOsProfile({ computerName: `$(reboot)\nweb-01;${'x'.repeat(70)}` })),
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
