/**
 * `npm run test:long`'s global setup: the booted tests need root on Linux and namespaces. Their suites skip
 * elsewhere; run as the long checks they must not pass by skipping everything, so this fails the run instead.
 */
import { assertNamespaces } from '../e2e/ns.js';

export default function setup(): void {
  assertNamespaces();
}
