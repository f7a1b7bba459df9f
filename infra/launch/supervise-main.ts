// `node dist/infra/launch/supervise-main.js <name> -- <node flags…> <script>`: runs `node <flags…>
// <script>` under supervise.ts (started again when it fails), as infra/scripts/start-stack.sh does for
// every service of `make run`.
import { supervise, type Supervisor } from './supervise.js';

const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
if (dash !== 1 || argv.length < 3) {
  process.stderr.write('usage: supervise-main.js <name> -- <node flags…> <script> [args…]\n');
  process.exit(2);
}
// The handlers first, then the child: a SIGTERM that came while the child was being spawned (uv_spawn
// waits for its exec), with no handler yet, ended the supervisor at once and left the child running
// with no parent, holding its port (seen when a failed `make run` stopped what it had just started).
// A handler runs on a later turn of the event loop, once `supervisor` is set.
let supervisor: Supervisor | undefined;
// Not SIGHUP: nohup starts the stack with it ignored, so that closing the terminal leaves it running.
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => supervisor?.stop(signal));
supervisor = supervise({ name: argv[0]!, command: process.execPath, args: argv.slice(2) });
void supervisor.ended.then((code) => process.exit(code));
