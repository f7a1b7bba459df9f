// The rules every variable's value follows (infra/config.ts, README "Configuration"), from an
// operator's probe: empty values that became 0, numbers read in other notations, timers past Node's
// limit, listen addresses and URLs taken unchecked, TRUSTED_PROXIES read two ways.
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ClientAddressResolver } from '../relay/auth/client-address.js';
import { ConfigError, type Config, loadConfig, MAX_TIMER_MS, parseTrustedProxies } from './config.js';

/** The refusal's lines (`NAME: …; got "…"`), or [] when the configuration loads. */
function refusal(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message.split('\n').slice(1).map((l) => l.trim());
  }
}

const defaults = loadConfig({});
/** Every variable of the configuration, those without a default included. */
const NAMES = [...Object.keys(defaults), 'REDIS_CLUSTER_NODES', 'REDIS_SHARDS', 'REDIS_SETTLE_WAIT_REPLICAS', 'ROOT_PASSWORD', 'ROOT_PASSWORD_FILE', 'DEMO_PASSWORD', 'ADMIN_PASSWORD'];
/** Their empty value is a documented setting of its own: taken as written. */
const KEEP_EMPTY = ['TRUSTED_PROXIES', 'CHANNEL_HEALTH_WEBHOOK_URL', 'CLICKHOUSE_PASSWORD', 'CLICKHOUSE_CLUSTER', 'KEY_SECRET'];

describe('an empty or blank value is unset: the documented default', () => {
  it('for every variable: VAR= and VAR=" " load as if absent', () => {
    expect(new Set(NAMES).size).toBe(NAMES.length);
    for (const name of NAMES) {
      for (const value of KEEP_EMPTY.includes(name) ? [''] : ['', ' ', '\t ']) {
        const config = loadConfig({ [name]: value }) as Record<string, unknown>;
        expect(config[name], `${name}=${JSON.stringify(value)}`).toEqual((defaults as Record<string, unknown>)[name]);
      }
    }
  });

  it('the probe\'s cases: no random port, the drain kept, WAIT on a cluster, the lock limit and the fault rule kept', () => {
    const c = loadConfig({
      RELAY_PORT: '', RELAY_SHUTDOWN_GRACE_MS: '', CONSOLE_DB_LOCK_TIMEOUT_MS: ' ', CHANNEL_FAULTS_TO_DISABLE: '', REDIS_SETTLE_WAIT_REPLICAS: '',
      RELAY_HOST: '', CONSOLE_HOST: ' ', RELAY_METRICS_HOST: '', BILLING_METRICS_HOST: '',
    });
    expect([c.RELAY_PORT, c.RELAY_SHUTDOWN_GRACE_MS, c.CONSOLE_DB_LOCK_TIMEOUT_MS, c.CHANNEL_FAULTS_TO_DISABLE]).toEqual([3000, 30_000, 5000, 5]);
    expect(c.REDIS_SETTLE_WAIT_REPLICAS).toBeUndefined();
    expect([c.RELAY_HOST, c.CONSOLE_HOST, c.RELAY_METRICS_HOST, c.BILLING_METRICS_HOST]).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1', '127.0.0.1']);
  });

  it('keeps the variables whose empty value is documented as they were', () => {
    expect(loadConfig({ TRUSTED_PROXIES: ' ' }).TRUSTED_PROXIES).toBe(' ');
    expect(loadConfig({ CLICKHOUSE_PASSWORD: ' ' }).CLICKHOUSE_PASSWORD).toBe(' ');
    expect(refusal({ CHANNEL_HEALTH_WEBHOOK_URL: ' ' })).toEqual(['CHANNEL_HEALTH_WEBHOOK_URL: expected empty, or an http:// or https:// URL; value not shown (a secret)']);
    expect(refusal({ CLICKHOUSE_CLUSTER: ' ' })).toHaveLength(1);
  });

  it('BILLING_CONSUMER empty is the per-process default, host and pid', () => {
    expect(loadConfig({ BILLING_CONSUMER: '' }).BILLING_CONSUMER).toBe(`${hostname()}-${process.pid}`);
    expect(loadConfig({ BILLING_CONSUMER: ' ' }).BILLING_CONSUMER).toBe(`${hostname()}-${process.pid}`);
    expect(loadConfig({ BILLING_CONSUMER: 'worker-a' }).BILLING_CONSUMER).toBe('worker-a');
  });
});

describe('numbers are plain decimal', () => {
  it('refuses other notations, signs and spaces, naming the variable and the value', () => {
    for (const value of ['0x10', '1e3', ' 80 ', '80 ', '8 0', '+5', '-1', '80.0', '1_000', '0b1', 'Infinity', 'NaN', '８０']) {
      expect(refusal({ RELAY_PORT: value }), value).toEqual([`RELAY_PORT: expected a whole number from 0 to 65535, in decimal digits; got ${JSON.stringify(value)}`]);
    }
    expect(loadConfig({ RELAY_PORT: '080' }).RELAY_PORT).toBe(80);
    expect(refusal({ CHANNEL_FAULT_RATE_TO_DISABLE: '5e-1' })).toEqual(['CHANNEL_FAULT_RATE_TO_DISABLE: expected a decimal number from 0 to 1 (such as 0.5); got "5e-1"']);
    expect(loadConfig({ CHANNEL_FAULT_RATE_TO_DISABLE: '0.25' }).CHANNEL_FAULT_RATE_TO_DISABLE).toBe(0.25);
    expect(loadConfig({ CHANNEL_FAULT_RATE_TO_DISABLE: '.25' }).CHANNEL_FAULT_RATE_TO_DISABLE).toBe(0.25);
    expect(refusal({ RELAY_METRICS_PORT: '0x10' })).toEqual(['RELAY_METRICS_PORT: expected off, or a whole number from 0 to 65535, in decimal digits; got "0x10"']);
    expect(loadConfig({ RELAY_METRICS_PORT: 'off' }).RELAY_METRICS_PORT).toBe('off');
  });

  it('bounds every duration by the longest a Node timer waits, and the factors', () => {
    expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
    expect(refusal({ RESERVATION_REAP_INTERVAL_MS: '3000000000' })).toEqual([
      'RESERVATION_REAP_INTERVAL_MS: expected a whole number of milliseconds from 1 to 2147483647, in decimal digits; got "3000000000"',
    ]);
    expect(loadConfig({ RESERVATION_REAP_INTERVAL_MS: '2147483647' }).RESERVATION_REAP_INTERVAL_MS).toBe(MAX_TIMER_MS);
    const durations = NAMES.filter((n) => /_(MS|SEC)$/.test(n) && n !== 'SESSION_TTL_SEC');
    expect(durations.length).toBeGreaterThan(30);
    for (const name of durations) {
      const limit = name.endsWith('_SEC') ? Math.floor(MAX_TIMER_MS / 1000) : MAX_TIMER_MS;
      expect(refusal({ [name]: String(limit + 1) }), name).toHaveLength(1);
      expect(refusal({ [name]: '99999999999999999999' }), name).toHaveLength(1);
    }
    expect(loadConfig({ RESERVATION_TTL_SEC: '2147483' }).RESERVATION_TTL_SEC).toBe(2_147_483);
    expect(refusal({ SESSION_TTL_SEC: String(3650 * 86400 + 1) })).toHaveLength(1);
    expect(loadConfig({ SESSION_TTL_SEC: String(30 * 86400) }).SESSION_TTL_SEC).toBe(30 * 86400);
    expect(refusal({ TOKEN_ESTIMATE_FACTOR: '99999999999999999999' })).toEqual(['TOKEN_ESTIMATE_FACTOR: expected a decimal number from 1 to 100 (such as 1.5); got "99999999999999999999"']);
    expect(loadConfig({ TOKEN_ESTIMATE_FACTOR: '1.5' }).TOKEN_ESTIMATE_FACTOR).toBe(1.5);
    expect(refusal({ MAX_BODY_BYTES: '99999999999999999999' })).toHaveLength(1);
  });
});

describe('listen addresses', () => {
  it('an IP address or a host name', () => {
    for (const host of ['0.0.0.0', '::', '::1', '10.1.2.3', 'localhost', 'relay.internal', 'billing_worker', 'fe80::1%eth0']) {
      expect(loadConfig({ RELAY_HOST: host }).RELAY_HOST, host).toBe(host);
    }
    for (const host of [' 127.0.0.1', '127.0.0.1 ', 'http://relay', '999.1.1.1', '1.2.3.4.5', 'a b', '[::1]', 'relay:3000', '-relay', 'relay..internal']) {
      expect(refusal({ CONSOLE_HOST: host }), host).toEqual([`CONSOLE_HOST: expected an IP address (0.0.0.0 for every interface) or a host name; got ${JSON.stringify(host)}`]);
    }
    expect(refusal({ RELAY_METRICS_HOST: 'x y', BILLING_METRICS_HOST: 'x/y' }).map((l) => l.split(':')[0])).toEqual(['RELAY_METRICS_HOST', 'BILLING_METRICS_HOST']);
  });
});

describe('URLs', () => {
  it('REDIS_URL: redis://, rediss:// or redis+cluster://, the database a whole number', () => {
    for (const url of ['redis://127.0.0.1:6379/0', 'redis://127.0.0.1:6379', 'redis://127.0.0.1:6379/', 'redis://redis:6379/15', 'rediss://cache.example:6380/2',
      'redis://127.0.0.1:6379/99', 'redis+cluster://10.0.0.1:7000,redis-b:7001', 'redis+cluster://10.0.0.1:7000,redis-b:7001/0']) {
      expect(loadConfig({ REDIS_URL: url }).REDIS_URL, url).toBe(url);
    }
    const forms = 'expected redis://host:port/db, rediss://host:port/db or redis+cluster://host:port,host:port';
    expect(refusal({ REDIS_URL: 'ftp://127.0.0.1:6379/0' })).toEqual([`REDIS_URL: ${forms}; got "ftp://127.0.0.1:6379/0"`]);
    expect(refusal({ REDIS_URL: '127.0.0.1:6379' })).toEqual([`REDIS_URL: ${forms}; got "127.0.0.1:6379"`]);
    expect(refusal({ REDIS_URL: ' redis://127.0.0.1:6379/0' })).toHaveLength(1);
    expect(refusal({ REDIS_URL: 'redis://127.0.0.1:6379/db1' })[0]).toMatch(/^REDIS_URL: the path is the database index, a whole number/);
    expect(refusal({ REDIS_URL: 'redis://127.0.0.1:6379/-1' })).toHaveLength(1);
    expect(refusal({ REDIS_URL: 'redis+cluster://10.0.0.1:7000/3' })[0]).toMatch(/^REDIS_URL: a Redis Cluster has database 0 only/);
    expect(refusal({ REDIS_URL: 'redis+cluster://10.0.0.1' })[0]).toMatch(/^REDIS_URL: "10.0.0.1" is not host:port/);
    expect(refusal({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b' })[0]).toMatch(/^REDIS_CLUSTER_NODES: "redis-b" is not host:port/);
    expect(loadConfig({ REDIS_URL: '' }).REDIS_URL).toBe('redis://127.0.0.1:6379/0');
  });

  it('DATABASE_URL: postgres:// or postgresql:// with a database; CLICKHOUSE_URL: http(s)', () => {
    expect(loadConfig({ DATABASE_URL: 'postgresql://app@db.internal:5432/gateway' }).DATABASE_URL).toBe('postgresql://app@db.internal:5432/gateway');
    for (const url of ['mysql://127.0.0.1/gateway', 'postgres://127.0.0.1:5432', 'postgres://127.0.0.1:5432/', 'gateway']) {
      expect(refusal({ DATABASE_URL: url })[0], url).toMatch(/^DATABASE_URL: expected postgres:\/\/user@host:port\/database/);
    }
    expect(loadConfig({ DATABASE_URL: '' }).DATABASE_URL).toBe(defaults.DATABASE_URL);
    expect(loadConfig({ CLICKHOUSE_URL: 'https://ch.example:8443' }).CLICKHOUSE_URL).toBe('https://ch.example:8443');
    expect(refusal({ CLICKHOUSE_URL: 'ftp://127.0.0.1:8123' })).toEqual(['CLICKHOUSE_URL: expected an http:// or https:// URL; got "ftp://127.0.0.1:8123"']);
  });
});

describe('a refusal names each variable once, with the value unless it is secret', () => {
  it('one line per variable, all of them', () => {
    const lines = refusal({ RELAY_PORT: 'x', CONSOLE_PORT: '99999', LOG_LEVEL: 'loud', SEED_DEMO: 'maybe' });
    expect(lines).toEqual([
      'LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent; got "loud"',
      'RELAY_PORT: expected a whole number from 0 to 65535, in decimal digits; got "x"',
      'CONSOLE_PORT: expected a whole number from 0 to 65535, in decimal digits; got "99999"',
      'SEED_DEMO: expected one of true, false, 1, 0, yes, no; got "maybe"',
    ]);
  });

  it('never prints a secret, nor a URL that may hold a credential', () => {
    const secrets = { KEY_SECRET: 'short-secret-1', ROOT_PASSWORD: 'pw-abc', DEMO_PASSWORD: 'pw-def', ADMIN_PASSWORD: 'pw-ghi',
      DATABASE_URL: 'mysql://u:hunter2-db@h/x', REDIS_URL: 'redis://:hunter2-redis@h:6379/x', CLICKHOUSE_URL: 'ftp://u:hunter2-ch@h', CHANNEL_HEALTH_WEBHOOK_URL: 'hooks.example/T0/hunter2-hook' };
    const text = refusal(secrets).join('\n');
    expect(text.split('\n').map((l) => l.split(':')[0]).sort()).toEqual(Object.keys(secrets).sort());
    for (const value of ['short-secret', 'pw-', 'hunter2']) expect(text).not.toContain(value);
    expect(text).toContain('KEY_SECRET: must be at least 16 characters (make generates 32 random bytes); value not shown (a secret)');
    expect(text).toContain('REDIS_URL: the path is the database index');
    expect(refusal({ REDIS_URL: 'redis://h:6379/0?password=hunter2' }).join()).not.toContain('hunter2');
    // Nor does the error carry them where a logger serializing it (pino's err) would find them.
    let err: unknown;
    try {
      loadConfig(secrets);
    } catch (e) {
      err = e;
    }
    expect((err as ConfigError).problems).toHaveLength(8);
    expect(JSON.stringify({ ...(err as object) })).not.toContain('hunter2');
  });
});

describe('TRUSTED_PROXIES: one reading for the relay and the console', () => {
  it('refuses what the relay used to drop or crash on, at load', () => {
    expect(refusal({ TRUSTED_PROXIES: '10.0.0.1, abc' })).toEqual(['TRUSTED_PROXIES: "abc" is not an IP address or CIDR block; expected addresses and CIDR blocks separated by commas; got "10.0.0.1, abc"']);
    expect(refusal({ TRUSTED_PROXIES: '10.0.0.0/33' })[0]).toMatch(/^TRUSTED_PROXIES: "10.0.0.0\/33" is not an IP address or CIDR block/);
    for (const spec of ['10.0.0.0/8/1', '10.0.0.0/', '::1/129', 'proxy.internal', '10.0.0.0/08x']) expect(refusal({ TRUSTED_PROXIES: spec }), spec).toHaveLength(1);
    const c: Config = loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, ::1 192.0.2.7' });
    expect(parseTrustedProxies(c.TRUSTED_PROXIES)).toEqual([
      { entry: '10.0.0.0/8', address: '10.0.0.0', family: 'ipv4', prefix: 8 },
      { entry: '::1', address: '::1', family: 'ipv6' },
      { entry: '192.0.2.7', address: '192.0.2.7', family: 'ipv4' },
    ]);
  });

  it('the relay\'s resolver refuses them too, naming the variable', () => {
    expect(() => new ClientAddressResolver('abc')).toThrow('TRUSTED_PROXIES: "abc" is not an IP address or CIDR block');
    expect(() => new ClientAddressResolver('10.0.0.0/33')).toThrow('TRUSTED_PROXIES: "10.0.0.0/33" is not an IP address or CIDR block');
    const resolver = new ClientAddressResolver('10.0.0.0/8 ::1');
    expect(resolver.resolve('10.1.2.3', '203.0.113.7')).toBe('203.0.113.7');
    expect(resolver.resolve('::ffff:10.1.2.3', '203.0.113.7')).toBe('203.0.113.7');
    expect(resolver.resolve('::1', '203.0.113.7')).toBe('203.0.113.7');
    expect(resolver.resolve('192.0.2.1', '203.0.113.7')).toBe('192.0.2.1');
  });
});
