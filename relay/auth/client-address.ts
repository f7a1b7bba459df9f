// The client's address is the socket's, unless the socket is one of the trusted proxies: then it is
// the right-most X-Forwarded-For entry that is not itself a trusted proxy.
import { BlockList, isIP } from 'node:net';
import { compileAllowList } from './key-rules.js';

export class ClientAddressResolver {
  readonly #trusted: BlockList | null;

  constructor(trustedProxies: string) {
    this.#trusted = trustedProxies.trim() ? compileAllowList(trustedProxies) : null;
  }

  #isTrusted(ip: string): boolean {
    if (!this.#trusted) return false;
    const family = isIP(ip);
    if (family === 0) return false;
    if (this.#trusted.check(ip, family === 4 ? 'ipv4' : 'ipv6')) return true;
    return family === 6 && ip.startsWith('::ffff:') && this.#trusted.check(ip.slice(7), 'ipv4');
  }

  resolve(socketIp: string, forwardedFor: string): string {
    if (!forwardedFor || !this.#isTrusted(socketIp)) return socketIp;
    const hops = forwardedFor.split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!.trim();
      if (!isIP(hop)) return socketIp;
      if (!this.#isTrusted(hop)) return hop;
    }
    return hops[0]!.trim();
  }
}
