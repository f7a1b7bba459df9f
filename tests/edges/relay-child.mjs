// The relay alone, in a process of its own, for the edge fuzz (fuzz.integration.test.ts): a throw
// inside a uWebSockets.js handler aborts the whole process, and the test must see that as a failure
// it can report and reproduce rather than lose its own runner. Compiled code from dist/ (make build),
// on the same Postgres database, Redis prefix and KEY_SECRET as the test's stack: same keys, channels
// and invalidations.
import { testConfig } from '../../dist/infra/testing/test-config.js';
import { createLogger } from '../../dist/infra/logger.js';
import { startRelay } from '../../dist/relay/server.js';

const config = testConfig(JSON.parse(process.env.FUZZ_RELAY_ENV ?? '{}'));
const relay = await startRelay(config, createLogger(config, 'relay'));
process.send?.({ port: relay.port });
process.on('disconnect', () => process.exit(0));
