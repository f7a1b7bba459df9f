import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { LingeringBodies } from './body-linger.js';

describe('LingeringBodies', () => {
  it('drains a body (resumed if paused) and leaves it whole when its response ends within the grace', async () => {
    const bodies = new LingeringBodies(200);
    const body = new PassThrough();
    body.pause();
    bodies.hold(body);
    body.once('end', () => bodies.release(body));
    body.write('ping');
    body.end();
    await new Promise((resolve) => body.once('close', resolve));
    expect(body.readableEnded).toBe(true);
    expect(bodies.size).toBe(0);
  });

  it('destroys a body still open after the grace, and stops its timer once none lingers', async () => {
    const bodies = new LingeringBodies(50);
    const open = new PassThrough();
    const ping = setInterval(() => open.write(': ping\n\n'), 10);
    bodies.hold(open);
    await vi.waitFor(() => expect(open.destroyed).toBe(true), { timeout: 2000 });
    clearInterval(ping);
    expect(open.readableEnded).toBe(false);
    expect(bodies.size).toBe(0);
    // A body already ended or destroyed is not held.
    const ended = new PassThrough();
    ended.destroy();
    bodies.hold(ended);
    expect(bodies.size).toBe(0);
  });
});
