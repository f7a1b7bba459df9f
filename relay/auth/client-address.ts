// The client's address is the socket's, unless the socket is one of the trusted proxies: then it is
// the right-most X-Forwarded-For entry that is not itself a trusted proxy.
import { BlockList, isIP } from 'node:net';
import type { HttpRequest } from 'uWebSockets.js';
import { parseTrustedProxies } from '../../infra/config.js';
import { headerLines } from '../header-lines.js';

/**
 * Every X-Forwarded-For line of a request, joined in order as one list: uWS's getHeader gives the
 * first line only, so a client's own line ahead of the one its trusted proxy appended (HAProxy's
 * `option forwardfor` adds a line of its own) was taken for the whole list, and the client's claimed
 * address for its real one (a key's allow_ips bypassed). Called in the handler, before any await.
 */
export function forwardedForOf(req: Pick<HttpRequest, 'getHeader' | 'forEach'>): string {
  return headerLines(req, 'x-forwarded-for');
}

export class ClientAddressResolver {
  readonly #trusted: BlockList | null;

  /** `trustedProxies`: TRUSTED_PROXIES; throws naming it on a malformed entry, as the console does. */
  constructor(trustedProxies: string) {
    const proxies = parseTrustedProxies(trustedProxies);
    if (proxies.length === 0) {
      this.#trusted = null;
      return;
    }
    const list = new BlockList();
    for (const p of proxies) {
      if (p.prefix === undefined) list.addAddress(p.address, p.family);
      else list.addSubnet(p.address, p.prefix, p.family);
    }
    this.#trusted = list;
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
