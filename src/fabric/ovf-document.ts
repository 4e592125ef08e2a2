/**
 * ovf-env.xml documents the fake fabric hands out: the customer's document that `reprovisiondata` returns once a
 * pool VM is claimed (laid out as in docs/protocol.md#ovf-schema), with optional custom data and password.
 */

export interface OvfDocumentOptions {
  username: string;
  hostname: string;
  /** OpenSSH public key lines. */
  keys?: string[];
  /** Keys given only by their certificate's thumbprint (a `PublicKey` with `Fingerprint` and `Path`, no `Value`). */
  keyFingerprints?: string[];
  /** `KeyPairs`: private keys of goal state certificates to install at a path. */
  keyPairs?: Array<{ fingerprint: string; path: string }>;
  /** Raw bytes of the custom data; encoded as base64 wrapped at 76 characters, as the platform does. */
  customData?: Buffer;
  password?: string;
  disableSshPasswordAuthentication?: boolean;
  /** `PreprovisionedVMType` value; omitted means nil. */
  ppsType?: string;
  /** The legacy `PreprovisionedVm` flag; default false. */
  preprovisionedVm?: boolean;
  /** `ProvisionGuestProxyAgent`; omitted when not given. */
  provisionGuestProxyAgent?: boolean;
}

const escapeXml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Builds one ovf-env.xml document. */
export function ovfDocument(options: OvfDocumentOptions): string {
  const keys = (options.keys ?? [])
    .map((key) => `          <PublicKey><Path>/home/${escapeXml(options.username)}/.ssh/authorized_keys</Path><Value>${escapeXml(key.trim())}</Value></PublicKey>`)
    .concat((options.keyFingerprints ?? []).map((fp) => `          <PublicKey><Fingerprint>${escapeXml(fp)}</Fingerprint><Path>/home/${escapeXml(options.username)}/.ssh/authorized_keys</Path></PublicKey>`))
    .join('\n');
  const keyPairs = options.keyPairs?.length
    ? `\n        <KeyPairs>\n${options.keyPairs.map((p) => `          <KeyPair><Fingerprint>${escapeXml(p.fingerprint)}</Fingerprint><Path>${escapeXml(p.path)}</Path></KeyPair>`).join('\n')}\n        </KeyPairs>`
    : '';
  const customData = options.customData
    ? `      <CustomData>${options.customData.toString('base64').replace(/(.{76})/g, '$1\n')}</CustomData>\n`
    : '';
  const pps = options.ppsType ? `<wa:PreprovisionedVMType>${escapeXml(options.ppsType)}</wa:PreprovisionedVMType>` : '<wa:PreprovisionedVMType i:nil="true"/>';
  return `<?xml version="1.0" encoding="utf-8"?>
<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" xmlns:wa="http://schemas.microsoft.com/windowsazure" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
  <wa:ProvisioningSection>
    <wa:Version>1.0</wa:Version>
    <LinuxProvisioningConfigurationSet xmlns="http://schemas.microsoft.com/windowsazure" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
      <ConfigurationSetType>LinuxProvisioningConfiguration</ConfigurationSetType>
      <HostName>${escapeXml(options.hostname)}</HostName>
      <UserName>${escapeXml(options.username)}</UserName>
      <UserPassword>${escapeXml(options.password ?? '')}</UserPassword>
      <DisableSshPasswordAuthentication>${options.disableSshPasswordAuthentication ?? true}</DisableSshPasswordAuthentication>
      <SSH>
        <PublicKeys>
${keys}
        </PublicKeys>${keyPairs}
      </SSH>
${customData}    </LinuxProvisioningConfigurationSet>
  </wa:ProvisioningSection>
  <wa:PlatformSettingsSection>
    <wa:Version>1.0</wa:Version>
    <wa:PlatformSettings>
      <wa:ProvisionGuestAgent>true</wa:ProvisionGuestAgent>${options.provisionGuestProxyAgent === undefined ? '' : `\n      <wa:ProvisionGuestProxyAgent>${options.provisionGuestProxyAgent}</wa:ProvisionGuestProxyAgent>`}
      <wa:PreprovisionedVm>${options.preprovisionedVm ?? false}</wa:PreprovisionedVm>
      ${pps}
    </wa:PlatformSettings>
  </wa:PlatformSettingsSection>
</Environment>
`;
}
