// The Makefile's local_secret writes KEY_SECRET and the demo passwords into .data/: a world-readable
// key-secret would let any local account open every sealed API key and redemption code.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';

const SECRETS = ['key-secret', 'demo-password', 'admin-password'];
let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `make help` in a scratch directory, under the usual umask, so that the Makefile's $(shell) calls run there. */
function makeHelpIn(cwd: string): void {
  const env = { ...process.env };
  for (const name of ['KEY_SECRET', 'DEMO_PASSWORD', 'ADMIN_PASSWORD', 'MAKEFLAGS', 'MAKELEVEL']) delete env[name];
  execFileSync('bash', ['-c', 'umask 022 && exec make -s -C "$1" -f "$2" help', 'make-help', cwd, join(projectRoot(), 'Makefile')], { env, stdio: 'ignore' });
}

describe('the Makefile keeps the local secrets private', () => {
  it('creates .data/key-secret and the demo passwords readable by their owner only', () => {
    dir = mkdtempSync(join(tmpdir(), 'local-secrets-'));
    makeHelpIn(dir);
    for (const name of SECRETS) {
      const file = join(dir, '.data', name);
      expect(statSync(file).mode & 0o777, name).toBe(0o600);
      expect(readFileSync(file, 'utf8').length, name).toBeGreaterThanOrEqual(12);
    }
    // Postgres, started as its own user under .data/postgres, must still get through the folder.
    expect(statSync(join(dir, '.data')).mode & 0o005).toBe(0o005);
  });

  it('makes the files of an earlier checkout private too, keeping their values', () => {
    dir = mkdtempSync(join(tmpdir(), 'local-secrets-'));
    mkdirSync(join(dir, '.data'));
    for (const name of SECRETS) {
      writeFileSync(join(dir, '.data', name), `old-${name}-value`);
      chmodSync(join(dir, '.data', name), 0o644);
    }
    makeHelpIn(dir);
    for (const name of SECRETS) {
      const file = join(dir, '.data', name);
      expect(statSync(file).mode & 0o777, name).toBe(0o600);
      expect(readFileSync(file, 'utf8'), name).toBe(`old-${name}-value`);
    }
  });
});
