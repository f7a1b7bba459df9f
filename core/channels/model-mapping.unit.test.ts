import { describe, expect, it } from 'vitest';
import { mappedModel } from './model-mapping.js';

describe('mappedModel', () => {
  it('maps a name the mapping names with a non-empty string, else keeps it', () => {
    expect(mappedModel('{"alias":"o3-mini"}', 'alias')).toBe('o3-mini');
    expect(mappedModel('{"alias":""}', 'alias')).toBe('alias');
    expect(mappedModel('{"alias":3}', 'alias')).toBe('alias');
    expect(mappedModel('', 'alias')).toBe('alias');
    expect(mappedModel('not json', 'alias')).toBe('alias');
    expect(mappedModel('null', 'alias')).toBe('alias');
  });

  it('finds no member of Object for a model named after one', () => {
    for (const name of ['constructor', 'toString', 'valueOf', '__proto__', 'hasOwnProperty']) expect(mappedModel('{"a":"b"}', name)).toBe(name);
  });
});
