import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BootstateError } from '../../src/core/errors.js';
import { parseOvfEnv } from '../../src/azure/ovf.js';
import { normalizeThumbprint } from '../../src/core/metadata.js';
import { SecretStore } from '../../src/core/secrets.js';
import { KEY, specExample } from '../os/fixtures/ovf.js';

const password = (secrets: SecretStore) => secrets.withPassword((b) => b.toString('utf8'));

describe('parseOvfEnv', () => {
  it('reads the example document', () => {
    expect(parseOvfEnv(specExample(), { device: '/dev/sr0' })).toEqual({
      username: 'azureuser',
      hostname: 'web-01',
      disablePasswordAuthentication: true,
      publicKeys: [KEY],
      passwordProvided: false,
      customDataPresent: true,
      ppsType: 'None',
      device: '/dev/sr0',
    });
  });

  it('puts a password into the SecretStore and nowhere in the result', () => {
    const secrets = new SecretStore();
    const result = parseOvfEnv(specExample({ password: 'p&amp;ss &lt;w0rd&gt;' }), { secrets });
    expect(result.passwordProvided).toBe(true);
    expect(password(secrets)).toBe('p&ss <w0rd>');
    expect(JSON.stringify(result)).not.toContain('w0rd');
  });

  it('rejects a password over 72 characters without the value in message or data', () => {
    const secret = 'Z'.repeat(73);
    const secrets = new SecretStore();
    const error = (() => {
      try {
        parseOvfEnv(specExample({ password: secret }), { secrets });
      } catch (e) {
        return e as BootstateError;
      }
      throw new Error('expected a rejection');
    })();
    expect(error.code).toBe('PASSWORD_TOO_LONG');
    expect(error.data).toEqual([['length', '73'], ['max_length', '72']]);
    expect(`${error.message}${JSON.stringify(error.toFailure())}`).not.toContain('ZZZZ');
    expect(secrets.hasPassword()).toBe(false);
  });

  it('matches by namespace, whatever the prefixes: ns1:, default namespace everywhere', () => {
    const ns1 = specExample().replaceAll('wa:', 'ns1:').replace('xmlns:wa=', 'xmlns:ns1=');
    expect(parseOvfEnv(ns1).username).toBe('azureuser');
    const defaults = `<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"><ProvisioningSection xmlns="http://schemas.microsoft.com/windowsazure"><LinuxProvisioningConfigurationSet><UserName>bob</UserName><HostName>h1</HostName></LinuxProvisioningConfigurationSet></ProvisioningSection></Environment>`;
    expect(parseOvfEnv(defaults)).toMatchObject({ username: 'bob', hostname: 'h1', disablePasswordAuthentication: null, publicKeys: [] });
  });

  it('ignores elements of a foreign namespace with the right local name', () => {
    const foreign = specExample().replace('<UserName>azureuser</UserName>', '<x:UserName xmlns:x="urn:other">mallory</x:UserName>');
    expect(parseOvfEnv(foreign).username).toBeNull();
  });

  it('accepts both spellings of the preprovisioning type element', () => {
    expect(parseOvfEnv(specExample({ ppsElement: '<wa:PreprovisionedVMType>Savable</wa:PreprovisionedVMType>' })).ppsType).toBe('Savable');
    expect(parseOvfEnv(specExample({ ppsElement: '<wa:PreprovisionedVmType>Running</wa:PreprovisionedVmType>' })).ppsType).toBe('Running');
  });

  it('rejects a DOCTYPE outright: internal entity expansion and external entities never run', () => {
    const laughs = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"><x>&lol2;</x></Environment>`;
    const external = specExample().replace('<?xml version="1.0" encoding="utf-8"?>', '<?xml version="1.0"?><!DOCTYPE Environment [<!ENTITY xxe SYSTEM "file:///etc/shadow">]>').replace('azureuser</UserName>', '&xxe;</UserName>');
    for (const doc of [laughs, external]) expect(() => parseOvfEnv(doc)).toThrow(expect.objectContaining({ code: 'OVF_INVALID' }));
  });

  it('refuses an undefined entity reference instead of passing it through', () => {
    expect(() => parseOvfEnv(specExample().replace('azureuser</UserName>', '&xxe;</UserName>'))).toThrow(expect.objectContaining({ code: 'OVF_INVALID' }));
  });

  it('treats a duplicated property, a missing ProvisioningSection and malformed XML as invalid', () => {
    const twice = specExample().replace('<UserName>azureuser</UserName>', '<UserName>a</UserName><UserName>b</UserName>');
    const noSection = '<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1"/>';
    for (const doc of [twice, noSection, '<Environment', '', 'not xml']) {
      expect(() => parseOvfEnv(doc), doc).toThrow(expect.objectContaining({ code: 'OVF_INVALID' }));
    }
  });

  it('keeps a key given only by Fingerprint and Path, and each KeyPair, with the thumbprint as Azure writes it', () => {
    const doc = specExample().replace(
      `<Value>${KEY}</Value>`,
      '</PublicKey><PublicKey><Fingerprint>eb:0c:0a:b4:b2:d5:fc:35:f2:f0:65:8d:19:f4:4c:82:83:e2:dd:62</Fingerprint><Path>/home/azureuser/.ssh/authorized_keys</Path><Value> </Value>',
    ).replace('</PublicKeys>', '</PublicKeys><KeyPairs><KeyPair><Fingerprint>0123456789ABCDEF0123456789ABCDEF01234567</Fingerprint><Path>$HOME/azureuser/.ssh/id_rsa</Path></KeyPair></KeyPairs>');
    const media = parseOvfEnv(doc);
    expect(media.publicKeys).toEqual([]);
    expect(media.keyFingerprints).toEqual([
      { fingerprint: '6BE7A7C3C8A8F4B123CCA5D0C2F1BE4CA7B63ED7', path: '/home/azureuser/.ssh/authorized_keys' },
      { fingerprint: 'EB0C0AB4B2D5FC35F2F0658D19F44C8283E2DD62', path: '/home/azureuser/.ssh/authorized_keys' },
    ]);
    expect(media.keyPairs).toEqual([{ fingerprint: '0123456789ABCDEF0123456789ABCDEF01234567', path: '$HOME/azureuser/.ssh/id_rsa' }]);
  });

  it('keeps a Fingerprint that is no thumbprint as written, so the certificate step can name it', () => {
    const doc = specExample().replace(`<Value>${KEY}</Value>`, '').replace('6BE7A7C3C8A8F4B123CCA5D0C2F1BE4CA7B63ED7', 'not-a-thumbprint');
    expect(parseOvfEnv(doc).keyFingerprints).toEqual([{ fingerprint: 'not-a-thumbprint', path: '/home/azureuser/.ssh/authorized_keys' }]);
  });

  it('normalises every spelling of a SHA-1 thumbprint to 40 upper-case hex digits and refuses anything else', () => {
    const bytes = fc.uint8Array({ minLength: 20, maxLength: 20 });
    fc.assert(
      fc.property(bytes, fc.boolean(), fc.boolean(), (raw, colons, lower) => {
        const hex = Buffer.from(raw).toString('hex').toUpperCase();
        let written = colons ? hex.match(/../g)!.join(':') : hex;
        if (lower) written = written.toLowerCase();
        expect(normalizeThumbprint(` ${written}\n`)).toBe(hex);
      }),
    );
    fc.assert(fc.property(fc.string(), (text) => {
      const result = normalizeThumbprint(text);
      if (result !== null) expect(result).toMatch(/^[0-9A-F]{40}$/);
    }));
    expect(normalizeThumbprint('AB'.repeat(19))).toBeNull();
    expect(normalizeThumbprint('G'.repeat(40))).toBeNull();
  });

  it('never throws anything but a BootstateError, whatever the input', () => {
    const base = specExample();
    const mutated = fc.tuple(fc.nat(base.length), fc.nat(40), fc.string({ maxLength: 8 })).map(([at, cut, insert]) => base.slice(0, at) + insert + base.slice(at + cut));
    fc.assert(
      fc.property(fc.oneof(fc.string(), mutated), (doc) => {
        try {
          parseOvfEnv(doc, { secrets: new SecretStore() });
        } catch (error) {
          expect(error).toBeInstanceOf(BootstateError);
          expect(['OVF_INVALID', 'PASSWORD_TOO_LONG']).toContain((error as BootstateError).code);
        }
      }),
      { numRuns: 300 },
    );
  });
});
