/**
 * parseOvfEnv against mutated ovf-env.xml: valid documents with hostile values, broken markup, and entity
 * attacks (billion laughs, external entities). A planted file's content must never come back from the parser.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseOvfEnv } from '../../src/azure/ovf.js';
import { SecretStore } from '../../src/core/secrets.js';
import { specExample } from '../os/fixtures/ovf.js';
import { FUZZ_RUNS, hostileString, outcome, params, timeoutFor } from './support.js';

const CANARY = `planted-${Math.random().toString(36).slice(2)}-never-read`;
const planted = join(mkdtempSync(join(tmpdir(), 'bootstate-fuzz-ovf-')), 'planted.txt');
writeFileSync(planted, `${CANARY}\n`);

const FIELDS = ['HostName', 'UserName', 'UserPassword', 'DisableSshPasswordAuthentication', 'Value', 'CustomData', 'ConfigurationSetType'];

const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The example document with the text of one field replaced (escaped or raw, so markup can break too). */
const valueMutation = fc
  .tuple(fc.constantFrom(...FIELDS), hostileString(), fc.boolean())
  .map(([field, value, escaped]) =>
    specExample().replace(new RegExp(`(<${field}>)[^<]*(</${field}>)`), (_m, open: string, close: string) => `${open}${escaped ? escapeXml(value) : value}${close}`),
  );

/** The example document with a slice cut out, duplicated or overwritten: truncated tags, unbalanced elements. */
const markupMutation = fc
  .tuple(fc.nat(), fc.nat({ max: 200 }), fc.constantFrom('cut', 'duplicate', 'overwrite'), fc.string({ maxLength: 12 }))
  .map(([at, length, op, text]) => {
    const doc = specExample();
    const start = at % doc.length;
    const slice = doc.slice(start, start + length);
    if (op === 'cut') return doc.slice(0, start) + doc.slice(start + length);
    if (op === 'duplicate') return doc.slice(0, start) + slice + slice + doc.slice(start + length);
    return doc.slice(0, start) + text + doc.slice(start + text.length);
  });

const entity = (decl: string, use: string) =>
  specExample().replace('<Environment', `<!DOCTYPE Environment [${decl}]>\n<Environment`).replace('<UserName>azureuser</UserName>', `<UserName>${use}</UserName>`);

const billionLaughs = fc.integer({ min: 2, max: 12 }).map((depth) => {
  const decls = ['<!ENTITY l0 "lol">'];
  for (let i = 1; i <= depth; i++) decls.push(`<!ENTITY l${i} "${`&l${i - 1};`.repeat(10)}">`);
  return entity(decls.join(''), `&l${depth};`);
});

const externalEntity = fc
  .tuple(fc.constantFrom('SYSTEM', 'PUBLIC "-//x//y"'), fc.constantFrom(`file://${planted}`, planted, `http://127.0.0.1:9/${CANARY}`), fc.constantFrom('%', ''), fc.constantFrom('DOCTYPE', 'doctype', 'DocType'))
  .map(([kind, uri, parameter, spelling]) => {
    const decl = parameter ? `<!ENTITY % p ${kind} "${uri}"> %p;` : `<!ENTITY e ${kind} "${uri}">`;
    return entity(decl, parameter ? 'x' : '&e;').replace('<!DOCTYPE', `<!${spelling}`);
  });

function mustNotLeak(text: string): void {
  const secrets = new SecretStore();
  const result = outcome(() => parseOvfEnv(text, { secrets }));
  const seen = result.ok ? JSON.stringify(result.value) : `${result.error.message}${JSON.stringify(result.error.data)}`;
  expect(seen).not.toContain(CANARY);
  if (secrets.hasPassword()) expect(secrets.withPassword((b) => b.toString('utf8'))).not.toContain(CANARY);
  if (!result.ok) expect(['OVF_INVALID', 'PASSWORD_TOO_LONG']).toContain(result.error.code);
}

describe(`parseOvfEnv on ${FUZZ_RUNS} mutated documents per generator`, () => {
  it('returns plain metadata or rejects with an OVF reason, for hostile field values', { timeout: timeoutFor(3) }, () => {
    fc.assert(
      fc.property(valueMutation, (xml) => {
        const secrets = new SecretStore();
        const result = outcome(() => parseOvfEnv(xml, { secrets }));
        if (!result.ok) return void expect(['OVF_INVALID', 'PASSWORD_TOO_LONG']).toContain(result.error.code);
        const m = result.value;
        for (const v of [m.username, m.hostname]) expect(v === null || typeof v === 'string').toBe(true);
        expect(m.publicKeys.every((k) => typeof k === 'string' && k.length > 0)).toBe(true);
        expect(m.passwordProvided).toBe(secrets.hasPassword());
      }),
      params,
    );
  });

  it('rejects broken markup with OVF_INVALID and nothing else', { timeout: timeoutFor(3) }, () => {
    fc.assert(fc.property(markupMutation, mustNotLeak), params);
  });

  it('rejects internal entity expansion (billion laughs) at once, without expanding it', { timeout: timeoutFor(3) }, () => {
    fc.assert(
      fc.property(billionLaughs, (xml) => {
        const started = performance.now();
        const result = outcome(() => parseOvfEnv(xml));
        expect(result.ok).toBe(false);
        expect(performance.now() - started).toBeLessThan(200);
        if (!result.ok) expect(JSON.stringify(result.error.data)).not.toContain('lollol');
      }),
      params,
    );
  });

  it('rejects external entities and never reads the file they name', { timeout: timeoutFor(3) }, () => {
    fc.assert(
      fc.property(externalEntity, (xml) => {
        expect(outcome(() => parseOvfEnv(xml)).ok).toBe(false);
        mustNotLeak(xml);
      }),
      params,
    );
  });
});
