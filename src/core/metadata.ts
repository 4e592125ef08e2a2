/**
 * What Azure tells this VM about itself, whichever way it came: the instance metadata (src/azure/imds.ts), the
 * provisioning media or a claim's `reprovisiondata` (ovf-env.xml, src/os/ovf.ts). Shapes and limits only, shared by
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
  /** `compute.userData` was present: decoded into the SecretStore (`present`) or not base64 (`invalid`). */
  userData?: 'present' | 'invalid';
}

/** What the provisioning media (ovf-env.xml) told us. The password never appears here: see SecretStore. */
export interface MediaMetadata {
  username: string | null;
  hostname: string | null;
  disablePasswordAuthentication: boolean | null;
  publicKeys: string[];
  passwordProvided: boolean;
  customDataPresent: boolean;
  /** Set to `verbatim` only when CustomData was not base64 (peers' samples carry plain text): kept as received. */
  customDataEncoding?: 'base64' | 'verbatim';
  ppsType: string;
  /** The media's `ProvisionGuestProxyAgent` was true (absent: false). */
  provisionGuestProxyAgent?: boolean;
  device: string;
}
