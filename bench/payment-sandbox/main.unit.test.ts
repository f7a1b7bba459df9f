// The payment sandboxes' launcher (dist/bench/payment-sandbox/main.js, under `make run`): a port
// variable it cannot use is one line naming it and exit 78 (a configuration: the local supervisor does
// not start it again); a port another process holds is one line naming it and exit 1. Before (review
// operator, finding 5), Node's RangeError [ERR_SOCKET_BAD_PORT] or EADDRINUSE stack.
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';

function sandbox(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(projectRoot(), 'dist/bench/payment-sandbox/main.js')], { cwd: projectRoot(), env: { ...process.env, ...env }, timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

describe('payment-sandbox main', () => {
  it('a port that is not one: one line naming the variable, exit 78', async () => {
    for (const [name, value] of [['EPAY_SANDBOX_PORT', 'abc'], ['CARDPAY_SANDBOX_PORT', '-1'], ['EPAY_SANDBOX_PORT', '70000']] as const) {
      const r = await sandbox({ EPAY_SANDBOX_PORT: '0', CARDPAY_SANDBOX_PORT: '0', [name]: value });
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr).toBe(`payment-sandbox: invalid configuration: ${name}: expected a whole number from 0 to 65535, in decimal digits; got "${value}"\n`);
      expect(r.stdout).toBe('');
    }
  });

  it('a port another process holds: one line naming it and its variable, exit 1', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as { port: number };
    try {
      const r = await sandbox({ EPAY_SANDBOX_PORT: '0', CARDPAY_SANDBOX_PORT: String(port) });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toBe(`payment-sandbox could not listen on 127.0.0.1:${port} (CARDPAY_SANDBOX_PORT): the port is in use (another process listens there)\n`);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});
