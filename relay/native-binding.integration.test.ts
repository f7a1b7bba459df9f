// The relay must refuse to run on uWebSockets.js's slow JS fallback. Checked in a child process on
// the compiled relay (make test builds dist/ first), since this process already loaded the binding.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import { assertNativeUws } from './native-binding.js';

const compiled = join(projectRoot(), 'dist/relay/native-binding.js');
const probe = `import(${JSON.stringify(compiled)}).then((m) => { m.assertNativeUws(); console.log('native ok'); })`;

describe('uWebSockets.js native binding', () => {
  it('is loaded here', () => {
    expect(() => assertNativeUws()).not.toThrow();
  });

  it('makes start-up fail loudly when the package falls back to its JS implementation', () => {
    expect(existsSync(compiled), 'dist/ is missing: run `make build`').toBe(true);
    const fallback = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
      env: { ...process.env, UWS_USE_FALLBACK: '1' }, encoding: 'utf8',
    });
    expect(fallback.status).not.toBe(0);
    expect(fallback.stderr).toContain('Refusing to start');
    const native = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8' });
    expect(native.status).toBe(0);
    expect(native.stdout).toContain('native ok');
  });
});
