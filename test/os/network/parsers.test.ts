/**
 * Property tests of the readers the image checks rely on: the YAML subset reader (netplan files), the INI reader
 * (networkd files, NetworkManager keyfiles) and the shell glob (networkd's Name=, ifupdown's source lines).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { globMatch, parseIni } from '../../../src/os/network/common.js';
import { parseYamlSubset, type YamlValue } from '../../../src/os/network/yaml-subset.js';

const key = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/);
const scalarText = fc.stringMatching(/^[A-Za-z0-9./:_-]{1,12}$/).filter((s) => !s.endsWith(':'));

/** Nested mappings and sequences of scalars, the shapes netplan files have. */
const tree: fc.Arbitrary<Record<string, YamlValue>> = fc.letrec<{ map: Record<string, YamlValue> }>((tie) => ({
  map: fc.dictionary(key, fc.oneof({ depthSize: 'small' }, scalarText, fc.array(scalarText, { minLength: 1, maxLength: 3 }), tie('map')), {
    minKeys: 1,
    maxKeys: 4,
  }),
})).map;

function block(value: Record<string, YamlValue>, indent: string, style: 'block' | 'flow'): string[] {
  return Object.entries(value).flatMap(([k, v]) => {
    if (typeof v === 'string') return [`${indent}${k}: "${v}"`];
    if (Array.isArray(v)) {
      const items = v.filter((x): x is string => typeof x === 'string');
      return style === 'flow' ? [`${indent}${k}: [${items.join(', ')}]`] : [`${indent}${k}:`, ...items.map((x) => `${indent}  - ${x}  # item`)];
    }
    return [`${indent}${k}:`, ...block(v, `${indent}  `, style)];
  });
}

describe('parseYamlSubset', () => {
  it('reads back block and flow documents it is given', () => {
    fc.assert(
      fc.property(tree, fc.constantFrom('block' as const, 'flow' as const), (doc, style) => {
        expect(parseYamlSubset(['# a comment', '---', ...block(doc, '', style)].join('\n'))).toEqual(doc);
      }),
    );
  });

  it('never throws on any text', () => {
    fc.assert(fc.property(fc.string({ maxLength: 200 }), (text) => void parseYamlSubset(text)));
  });
});

describe('parseIni', () => {
  const section = fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,10}$/);
  const value = fc.stringMatching(/^[^\n]{0,20}$/).map((s) => s.trim());
  it('reads back every key and its values in order, with comments and blank lines between', () => {
    fc.assert(
      fc.property(fc.dictionary(section, fc.array(fc.tuple(section, value), { maxLength: 5 }), { maxKeys: 4 }), (doc) => {
        const text = Object.entries(doc).flatMap(([s, kvs]) => ['', '# c', `[${s}]`, ...kvs.map(([k, v]) => `${k}=${v}`), '; c']).join('\n');
        const ini = parseIni(text);
        for (const [s, kvs] of Object.entries(doc)) {
          for (const [k] of kvs) expect(ini.get(s)?.get(k)).toEqual(kvs.filter(([k2]) => k2 === k).map(([, v]) => v));
        }
      }),
    );
  });
});

describe('globMatch', () => {
  const literal = fc.stringMatching(/^[A-Za-z0-9._+()$^|{}\\-]{0,12}$/);
  it('matches a literal only to itself, and * to anything', () => {
    fc.assert(
      fc.property(literal, literal, (a, b) => {
        expect(globMatch(a, b)).toBe(a === b);
        expect(globMatch('*', b)).toBe(true);
        expect(globMatch(`${a}*`, `${a}${b}`)).toBe(true);
      }),
    );
  });
  it('handles ?, classes and negated classes as fnmatch does', () => {
    expect(globMatch('eth?', 'eth1')).toBe(true);
    expect(globMatch('eth?', 'eth10')).toBe(false);
    expect(globMatch('en[ops]*', 'enp1s0')).toBe(true);
    expect(globMatch('eth[!0]', 'eth0')).toBe(false);
    expect(globMatch('eth[!0]', 'eth1')).toBe(true);
    expect(globMatch('[', '[')).toBe(true);
  });
});
