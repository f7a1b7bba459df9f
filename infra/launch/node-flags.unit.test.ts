// The launch flags of the relay and the billing worker: the default, an operator's own, a malformed one refused.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_INITIAL_OLD_SPACE_MB, nodeFlagsFor } from './node-flags.js';
import { projectRoot } from '../project-root.js';

describe('nodeFlagsFor', () => {
  it('starts each service with a large first old generation unless told otherwise', () => {
    expect(nodeFlagsFor('relay', {})).toEqual([`--initial-old-space-size=${DEFAULT_INITIAL_OLD_SPACE_MB}`]);
    expect(nodeFlagsFor('billing', { RELAY_NODE_FLAGS: '' })).toEqual([`--initial-old-space-size=${DEFAULT_INITIAL_OLD_SPACE_MB}`]);
  });

  it("takes the operator's flags, or none", () => {
    expect(nodeFlagsFor('relay', { RELAY_NODE_FLAGS: ' --initial-old-space-size=64  --max-semi-space-size=16 ' }))
      .toEqual(['--initial-old-space-size=64', '--max-semi-space-size=16']);
    expect(nodeFlagsFor('billing', { BILLING_NODE_FLAGS: '' })).toEqual([]);
  });

  it('refuses what is not a list of flags, naming the variable', () => {
    for (const bad of ['256', '--x; rm -rf /', '-e 1', '--initial-old-space-size=1 dist/other.js']) {
      expect(() => nodeFlagsFor('relay', { RELAY_NODE_FLAGS: bad })).toThrow(/RELAY_NODE_FLAGS/);
    }
  });
});

describe('node-flags-main', () => {
  const main = join(projectRoot(), 'dist/infra/launch/node-flags-main.js');
  it('prints the flags for the shell scripts, and exits 2 on an unknown service', () => {
    expect(execFileSync(process.execPath, [main, 'relay'], { env: { PATH: process.env.PATH } }).toString().trim())
      .toBe(`--initial-old-space-size=${DEFAULT_INITIAL_OLD_SPACE_MB}`);
    // The flags it prints start Node: V8 takes them.
    const flags = execFileSync(process.execPath, [main, 'billing'], { env: { PATH: process.env.PATH } }).toString().trim().split(' ');
    expect(execFileSync(process.execPath, [...flags, '-e', 'process.stdout.write("ok")']).toString()).toBe('ok');
    expect(spawnSync(process.execPath, [main, 'console']).status).toBe(2);
    expect(spawnSync(process.execPath, [main, 'relay'], { env: { PATH: process.env.PATH, RELAY_NODE_FLAGS: 'oops' } }).status).toBe(2);
  });
});
