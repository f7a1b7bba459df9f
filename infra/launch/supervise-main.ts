// `node dist/infra/launch/supervise-main.js <name> -- <node flags…> <script>`: runs `node <flags…>
// <script>` under supervise.ts (started again when it fails), as infra/scripts/start-stack.sh does for
// every service of `make run`.
import { supervise } from './supervise.js';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
if (dash !== 1 || argv.length < 3) {
  process.stderr.write('usage: supervise-main.js <name> -- <node flags…> <script> [args…]\n');
  process.exit(2);
}
const supervisor = supervise({ name: argv[0]!, command: process.execPath, args: argv.slice(2) });
// Not SIGHUP: nohup starts the stack with it ignored, so that closing the terminal leaves it running.
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => supervisor.stop(signal));
void supervisor.ended.then((code) => process.exit(code));
