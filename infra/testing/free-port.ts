import { createServer, type AddressInfo } from 'node:net';

/** A TCP port on 127.0.0.1 free at the time of the call (the OS's pick), for a server a test or the bench starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
