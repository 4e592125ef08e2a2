/**
 * `npm run test:boot`'s global setup: the booted tests need root on Linux and namespaces. In `npm test` their suites
 * skip elsewhere; run on their own they must not pass by skipping everything, so this fails the run instead.
 */
import { assertNamespaces } from '../e2e/ns.js';

export default function setup(): void {
  assertNamespaces();
}
