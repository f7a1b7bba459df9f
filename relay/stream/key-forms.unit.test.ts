// keyPattern: a channel key in every spelling JSON has for it, as JSON.parse reads them back.
import { describe, expect, it } from 'vitest';
import { CENSOR } from '../../infra/secrets/credential-text.js';
import { holdsKey, keyAnchor, scrubKeyText } from './key-forms.js';

const KEY = 'zqPHP/KEY+q8Wm3/Nv5Bx7Lk2J<&>"\\.';

function uEscape(s: string, upper = false): string {
  return [...s].map((c) => {
    const h = c.charCodeAt(0).toString(16).padStart(4, '0');
    return `\\u${upper ? h.toUpperCase() : h}`;
  }).join('');
}

describe('scrubKeyText', () => {
  it('scrubs the key as written and in JSON\'s escapes, each of which JSON.parse decodes to the key', () => {
    const forms = [
      KEY,
      JSON.stringify(KEY).slice(1, -1),
      JSON.stringify(KEY).slice(1, -1).replaceAll('/', '\\/'),
      JSON.stringify(KEY).slice(1, -1).replaceAll('<', '\\u003c').replaceAll('&', '\\u0026').replaceAll('>', '\\u003E'),
      uEscape(KEY),
      uEscape(KEY, true),
    ];
    for (const form of forms) {
      if (form !== KEY) expect(JSON.parse(`"${form}"`)).toBe(KEY);
      expect(holdsKey(`x ${form} y`, KEY)).toBe(true);
      expect(scrubKeyText(`bad key: ${form}.`, KEY)).toBe(`bad key: ${CENSOR}.`);
    }
  });

  it('leaves text without the key as it is', () => {
    expect(scrubKeyText('zqPHP/KEY+q8Wm3 and more', KEY)).toBe('zqPHP/KEY+q8Wm3 and more');
    expect(holdsKey('nothing', KEY)).toBe(false);
  });

  it('the anchor: the longest run no JSON writer escapes', () => {
    expect(keyAnchor('zqPHP/KEY+q8Wm3/Nv5Bx7Lk2J')).toBe('Nv5Bx7Lk2J');
    expect(keyAnchor('ab/cd/ef/gh/ij')).toBe('ab/cd/ef/gh/ij');
    expect(keyAnchor(undefined)).toBeUndefined();
  });
});
