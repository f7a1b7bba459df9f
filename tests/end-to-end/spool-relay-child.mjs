// A relay in a process of its own, for settlement-spool.integration.test.ts to kill -9: compiled code
// from SPOOL_RELAY_DIST (another build, e.g. one from before the spool) or this checkout's dist/.
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const dist = process.env.SPOOL_RELAY_DIST ? pathToFileURL(resolve(process.env.SPOOL_RELAY_DIST)).href : new URL('../../dist', import.meta.url).href;
const { testConfig } = await import(`${dist}/infra/testing/test-config.js`);
const { createLogger } = await import(`${dist}/infra/logger.js`);
const { startRelay } = await import(`${dist}/relay/server.js`);

const config = testConfig(JSON.parse(process.env.SPOOL_RELAY_ENV ?? '{}'));
const relay = await startRelay(config, createLogger(config, 'relay'));
process.send?.({ port: relay.port });
process.on('disconnect', () => process.exit(0));
