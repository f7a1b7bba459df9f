// Prints the Node flags a service is started with (node-flags.ts), for the shell scripts that start it:
//   node $(node dist/infra/launch/node-flags-main.js relay) dist/relay/main.js
import { LAUNCHED_SERVICES, nodeFlagsFor, type LaunchedService } from './node-flags.js';

const service = process.argv[2] as LaunchedService;
if (!LAUNCHED_SERVICES.includes(service)) {
  process.stderr.write(`usage: node-flags-main.js ${LAUNCHED_SERVICES.join('|')}\n`);
  process.exit(2);
}
try {
  process.stdout.write(`${nodeFlagsFor(service, process.env).join(' ')}\n`);
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(2);
}
