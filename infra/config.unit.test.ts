import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEV_KEY_SECRET, loadConfig } from './config.js';
import { projectRoot } from './project-root.js';
import { createApiKeyCrypto } from './secrets/api-key-crypto.js';

describe('safe defaults', () => {
  it('refuses the public development KEY_SECRET in every environment', () => {
    for (const NODE_ENV of ['development', 'test', 'production']) {
      expect(() => loadConfig({ NODE_ENV, KEY_SECRET: DEV_KEY_SECRET })).toThrow(/KEY_SECRET: is the public development value/);
    }
    expect(() => loadConfig({ KEY_SECRET: 'short' })).toThrow(/KEY_SECRET: must be at least 16 characters/);
  });

  it('hashes new passwords at the OWASP scrypt cost unless told otherwise, and refuses a cost outside 2^10-2^20', () => {
    expect(loadConfig({}).PASSWORD_SCRYPT_LOG2N).toBe(15);
    expect(loadConfig({ PASSWORD_SCRYPT_LOG2N: '12' }).PASSWORD_SCRYPT_LOG2N).toBe(12);
    for (const bad of ['9', '21', '1e1', '-12']) expect(() => loadConfig({ PASSWORD_SCRYPT_LOG2N: bad })).toThrow(/PASSWORD_SCRYPT_LOG2N/);
  });

  it('has no KEY_SECRET default, and nothing seals or looks up keys without one', () => {
    expect(loadConfig({}).KEY_SECRET).toBe('');
    expect(() => createApiKeyCrypto(loadConfig({}).KEY_SECRET)).toThrow(/KEY_SECRET is not set/);
  });

  // Before: the relay and the billing worker failed on it later, with a stack and exit 1, which the
  // supervisor took for a crash and started again to fail the same way.
  it('a relay, billing worker or console started without KEY_SECRET exits 78 (a configuration) in one line, saying why', () => {
    const env = { ...process.env, KEY_SECRET: '', RELAY_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: 'info', RELAY_METRICS_PORT: '0', BILLING_METRICS_PORT: '0' };
    for (const [main, name] of [['dist/relay/main.js', 'relay'], ['dist/billing/main.js', 'billing'], ['dist/console-api/main.js', 'console-api']] as const) {
      const run = spawnSync(process.execPath, [main], { cwd: projectRoot(), env, encoding: 'utf8', timeout: 20_000 });
      expect(run.status, `${main}: ${run.stdout}${run.stderr}`).toBe(78);
      expect(run.stdout + run.stderr).toBe(`${name}: invalid configuration: KEY_SECRET: is not set: give it 32 random bytes (head -c 32 /dev/urandom | base64); make generates one into .data/key-secret; unset\n`);
    }
  });

  it('seeds demo logins only when asked, and never with a built-in password', () => {
    const config = loadConfig({ KEY_SECRET: 'x'.repeat(32) });
    expect(config.SEED_DEMO).toBe(false);
    expect(config.DEMO_PASSWORD).toBeUndefined();
    expect(config.ADMIN_PASSWORD).toBeUndefined();
    expect(() => loadConfig({ SEED_DEMO: 'true' })).toThrow(/SEED_DEMO: needs DEMO_PASSWORD and ADMIN_PASSWORD/);
    expect(loadConfig({ SEED_DEMO: 'true', DEMO_PASSWORD: 'a-demo-password', ADMIN_PASSWORD: 'an-admin-password' }).SEED_DEMO).toBe(true);
  });
});
