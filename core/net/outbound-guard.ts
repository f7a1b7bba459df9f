// Where the gateway may send requests to addresses its users chose: a channel's base_url (console-api
// routes/channel.ts) and a low-balance notice webhook (billing/low-balance-notices.ts, validated by
// console-api/notices/setting-routes.ts), both under the same root option. A channel's base_url is where the console's channel test (and the relay)
// send the channel's sealed credential and the caller's request; pointed at the gateway's own network
// it would reach services that trust their neighbours (ClickHouse on 127.0.0.1:8123, Redis, cloud
// metadata on 169.254.169.254). Unless the root option ChannelAllowPrivateNetworks is set, only public
// unicast addresses are allowed: ipaddr.js names every special-purpose range (loopback, private,
// link-local, unique-local, unspecified 0.0.0.0 and ::, carrier-grade NAT, multicast, NAT64, 6to4,
// Teredo, ...) and unwraps IPv4-mapped IPv6 (::ffff:127.0.0.1) before classifying.
//
// A host name is checked by what it resolves to, twice: when the channel is written (early feedback)
// and in the connection's own DNS lookup (guardedAgent for the channel test, guardedConnector for the
// relay), so a name that resolves to a public address at creation and to 127.0.0.1 later (DNS
// rebinding) is still refused.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector } from 'undici';

/** True for a public unicast address; false for any special-purpose range or a malformed address. */
export function isPublicAddress(address: string): boolean {
  if (isIP(address) === 0) return false;
  const parsed = ipaddr.process(address);
  // ::/96 (IPv4-compatible, deprecated): ipaddr.js calls ::7f00:1 unicast, yet it spells 127.0.0.1.
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((p) => p === 0)) return false;
  return parsed.range() === 'unicast';
}

export const PRIVATE_TARGET = 'ERR_CHANNEL_PRIVATE_TARGET';

/** A base_url whose host is, or resolves to, an address that is not public. */
export class PrivateTargetError extends Error {
  readonly code = PRIVATE_TARGET;
  constructor(readonly host: string, readonly address: string) {
    super(`${host} ${host === address ? 'is' : `resolves to ${address}, which is`} a private, loopback or link-local address`);
    this.name = 'PrivateTargetError';
  }
}

/** The URL's host as an address literal (IPv6 brackets removed), or undefined for a name. */
function addressLiteral(hostname: string): string | undefined {
  const h = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return isIP(h) ? h : undefined;
}

export type TargetCheck = 'public' | 'unresolved';

/**
 * Throws PrivateTargetError when the URL's host is a non-public address or a name any of whose
 * addresses is. 'unresolved': the name does not resolve now (it reaches nothing now; the connection's
 * own lookup is checked again when it is used).
 */
export async function checkTarget(url: string): Promise<TargetCheck> {
  // WHATWG URL has already turned 0x7f.1, 2130706433 and the like into dotted quads.
  const host = new URL(url).hostname;
  const literal = addressLiteral(host);
  if (literal !== undefined) {
    if (!isPublicAddress(literal)) throw new PrivateTargetError(host, literal);
    return 'public';
  }
  let addresses: LookupAddress[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch {
    return 'unresolved';
  }
  const bad = addresses.find((a) => !isPublicAddress(a.address));
  if (bad) throw new PrivateTargetError(host, bad.address);
  return 'public';
}

/**
 * net.connect's lookup, refusing names that resolve to a non-public address. Node 20 asks for all
 * addresses (happy eyeballs) or for one; both answers are checked.
 */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, options, (err, address: string | LookupAddress[], family?: number) => {
    if (err) return callback(err, '', 0);
    const list = Array.isArray(address) ? address : [{ address, family: family ?? 0 }];
    const bad = list.find((a) => !isPublicAddress(a.address));
    if (bad) return callback(Object.assign(new PrivateTargetError(hostname, bad.address), { errno: undefined }) as NodeJS.ErrnoException, '', 0);
    (callback as (e: null, a: string | LookupAddress[], f?: number) => void)(null, address, family);
  });
};

/** An undici dispatcher whose connections only reach public addresses (literals are checked by checkTarget). */
export function guardedAgent(): Agent {
  return new Agent({ connect: { lookup: guardedLookup } });
}

/**
 * An undici connector whose connections only reach public addresses, for a dispatcher that is not
 * preceded by checkTarget: net.connect never looks an address literal up, so the lookup's check
 * alone would let http://127.0.0.1 through.
 */
export function guardedConnector(): buildConnector.connector {
  const connect = buildConnector({ lookup: guardedLookup });
  return (opts, callback) => {
    const literal = addressLiteral(opts.hostname);
    if (literal !== undefined && !isPublicAddress(literal)) {
      // Asynchronously, as a socket's error is: undici's client is mid-connect when it calls this.
      const err = new PrivateTargetError(opts.hostname, literal);
      process.nextTick(() => callback(err, null));
      return;
    }
    connect(opts, callback);
  };
}
