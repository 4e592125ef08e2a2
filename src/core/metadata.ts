/**
 * What Azure tells this VM about itself, whichever way it came: the instance metadata (src/azure/imds.ts), the
 * provisioning media or a claim's `reprovisiondata` (ovf-env.xml, src/azure/ovf.ts). Shapes and limits only, shared by
 * src/azure and src/os so that neither imports the other for them.
 */

/** The VM id reported when product_uuid cannot be read (azure-init's convention). */
export const ZERO_VM_ID = '00000000-0000-0000-0000-000000000000';

/** The largest ovf-env.xml read from a provisioning media or `reprovisiondata`. */
export const MAX_OVF_BYTES = 1024 * 1024;

/** What provisioning needs from instance metadata, after validation. Plain data, no secrets. */
export interface InstanceMetadata {
  vmId: string | null;
  adminUsername: string;
  computerName: string;
  disablePasswordAuthentication: boolean;
  /** OpenSSH public key lines as delivered (sanitised later by the ssh step). */
  publicKeys: string[];
  hasCustomData: boolean;
  ppsType: string;
  /** Where the VM runs and what it was made from, for the run's trace (read leniently: never fails the parse). */
  placement?: Placement;
  /** `compute.userData` was present: decoded into the SecretStore (`present`) or not base64 (`invalid`). */
  userData?: 'present' | 'invalid';
}

/** The VM's region, size and image as IMDS tells them; each absent when IMDS did not say, or said it oddly. */
export interface Placement {
  location?: string;
  vmSize?: string;
  /** `publisher:offer:sku` of a marketplace image. */
  imageName?: string;
  imageVersion?: string;
  /** A gallery or managed image's resource id. */
  imageId?: string;
}

/** What the provisioning media (ovf-env.xml) told us. The password never appears here: see SecretStore. */
export interface MediaMetadata {
  username: string | null;
  hostname: string | null;
  disablePasswordAuthentication: boolean | null;
  publicKeys: string[];
  /** `PublicKey` entries with a `Fingerprint` and no `Value`: their key is a certificate's of the goal state. */
  keyFingerprints?: CertificateReference[];
  /** `KeyPairs/KeyPair`: a private key, a certificate's of the goal state, to install at `path`. */
  keyPairs?: CertificateReference[];
  passwordProvided: boolean;
  customDataPresent: boolean;
  /** Set to `verbatim` only when CustomData was not base64 (peers' samples carry plain text): kept as received. */
  customDataEncoding?: 'base64' | 'verbatim';
  ppsType: string;
  /** The media's `ProvisionGuestProxyAgent` was true (absent: false). */
  provisionGuestProxyAgent?: boolean;
  device: string;
}

/** A certificate of the goal state named in ovf-env.xml: its SHA-1 thumbprint (upper-case hex) and a path. */
export interface CertificateReference {
  fingerprint: string;
  /** Where the key goes, as the media says (may be empty or use `$HOME`). */
  path: string;
}

/**
 * A certificate thumbprint as Azure writes it, 40 upper-case hex digits, from text that may have colons, spaces
 * or lower case; null when it is not a SHA-1 thumbprint.
 *
 * @example
 *   normalizeThumbprint('ab:cd…') // 'ABCD…'
 */
export function normalizeThumbprint(text: string): string | null {
  const hex = text.replace(/[\s:]/g, '').toUpperCase();
  return /^[0-9A-F]{40}$/.test(hex) ? hex : null;
}
