import { describe, expect, it } from 'vitest';
import { mixesLookAlikeScripts } from './username-scripts.js';

describe('mixesLookAlikeScripts', () => {
  it('is true for a name mixing Latin, Greek or Cyrillic letters', () => {
    for (const name of ['\u0430dmin', 'r\u043eot', 'adm\u03b9n', '\u043f\u03c1', 'user\u0455_1']) expect(mixesLookAlikeScripts(name), name).toBe(true);
  });

  it('is false for one script alone, with digits and punctuation, or Latin beside Han, kana or Hangul', () => {
    for (const name of ['admin', 'user_01', '\u0430\u0434\u043c\u0438\u043d', '\u03b1\u03b2\u03b3', '\u5f20\u4f1f', 'taro\u592a\u90ce', 'kim\uae40', 'sakura\u3055\u304f\u3089', '123', 'M\u00fcller']) {
      expect(mixesLookAlikeScripts(name), name).toBe(false);
    }
  });
});
