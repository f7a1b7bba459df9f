// Every failure of the catalogue is documented in the README's relay error table, with its status and
// Anthropic error type, and renders as Anthropic's error JSON.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import { RELAY_ERRORS, RelayError, statusLine, type RelayErrorCode } from './errors.js';

const readme = readFileSync(join(projectRoot(), 'README.md'), 'utf8');
const table = readme.slice(readme.indexOf('## Relay errors'));

describe('relay error catalogue', () => {
  for (const code of Object.keys(RELAY_ERRORS) as RelayErrorCode[]) {
    const { status, type } = RELAY_ERRORS[code];
    it(`${code}: ${status} ${type} is in the README table and renders as Anthropic's error JSON`, () => {
      expect(table).toMatch(new RegExp(`\\| ${status} \\| \`${type}\` \\|`));
      const err = new RelayError(code);
      expect(JSON.parse(err.body())).toEqual({ type: 'error', error: { type, message: RELAY_ERRORS[code].message } });
      expect(statusLine(status)).toMatch(new RegExp(`^${status} \\S`));
    });
  }
});
