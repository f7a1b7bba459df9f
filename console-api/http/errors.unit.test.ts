import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { ConsoleError, ERROR_CATALOGUE, type ErrorCode } from './errors.js';

describe('error catalogue', () => {
  const readme = readFileSync(join(projectRoot(), 'console-api/README.md'), 'utf8');

  it('documents every code with its status in README.md', () => {
    for (const [code, { status }] of Object.entries(ERROR_CATALOGUE)) {
      expect(readme, code).toMatch(new RegExp(`\\|\\s*\`${code}\`\\s*\\|\\s*${status}\\s*\\|`));
    }
  });

  it('builds errors with the catalogue status and message', () => {
    for (const code of Object.keys(ERROR_CATALOGUE) as ErrorCode[]) {
      const e = new ConsoleError(code);
      expect(e.status).toBe(ERROR_CATALOGUE[code].status);
      expect(e.message).toBe(ERROR_CATALOGUE[code].message);
    }
    expect(new ConsoleError('VALIDATION_FAILED', 'name: too long').message).toBe('name: too long');
  });
});
