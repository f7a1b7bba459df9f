// ProcSampler's accounting of a server that forks a process per connection (Watched.comm): a process
// that starts within the window is counted whole, as Postgres backends opened mid-run by a pool are.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ProcSampler } from './proc.js';

describe('ProcSampler', () => {
  it('counts the CPU of a process found by name that started during the window', async () => {
    const title = `proctest${process.pid % 100000}`;
    const sampler = new ProcSampler([{ name: 'forked', pids: [], comm: title }]);
    sampler.start();
    // Burns 300 ms of CPU time (however long that takes on a busy machine), says so, then idles until
    // killed: alive at the window's end, as a backend is.
    const burn = `process.title = ${JSON.stringify(title)};
      const t0 = process.cpuUsage(); let u;
      do { u = process.cpuUsage(t0); } while (u.user + u.system < 300000);
      process.stdout.write('burnt'); setTimeout(() => {}, 30000);`;
    const child = spawn(process.execPath, ['-e', burn], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      await new Promise((resolve, reject) => {
        child.stdout!.once('data', resolve);
        child.once('exit', () => reject(new Error('the burner exited')));
      });
      const forked = sampler.stop().find((u) => u.name === 'forked')!;
      expect(forked.cpuSec).toBeGreaterThanOrEqual(0.25);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
