// A header's value over all its lines: uWS's getHeader gives the first line only, where HTTP (RFC 9110
// §5.3) reads several lines of a list header as one value joined by commas, as proxies and clients
// may send them (`anthropic-beta` once per beta, `x-forwarded-for` once per hop).
//
// A walk over every header costs a few microseconds a request (a native call per header), and
// `anthropic-beta` comes with most requests (Claude Code sends it on every one). But the relay walks a
// body-carrying request's headers once anyway, for its framing (server.ts framingRefusal): that walk
// counts these headers' lines too (countListHeaderLine), so a second walk is made only for a header
// sent on several lines, or for a request the framing walk skipped.
import type { HttpRequest } from 'uWebSockets.js';

/** Lines counted by the framing walk of the request being handled; -1: its headers were not walked. */
let betaLines = -1;
let forwardedLines = -1;
/** The key headers' lines (auth/key-check.ts: a request naming two keys is refused, on any of their lines). */
let apiKeyLines = -1;
let authorizationLines = -1;

/** Before the framing walk of a request (`walked`: whether it walks its headers): the counts start again. */
export function startListHeaderCount(walked: boolean): void {
  betaLines = walked ? 0 : -1;
  forwardedLines = walked ? 0 : -1;
  apiKeyLines = walked ? 0 : -1;
  authorizationLines = walked ? 0 : -1;
}

/** One header line seen by the framing walk (names are lowercased by uWS). */
export function countListHeaderLine(name: string): void {
  if (name === 'anthropic-beta') betaLines++;
  else if (name === 'x-forwarded-for') forwardedLines++;
  else if (name === 'x-api-key') apiKeyLines++;
  else if (name === 'authorization') authorizationLines++;
}

function countedLines(name: string): number {
  switch (name) {
    case 'anthropic-beta': return betaLines;
    case 'x-forwarded-for': return forwardedLines;
    case 'x-api-key': return apiKeyLines;
    case 'authorization': return authorizationLines;
    default: return -1;
  }
}

/**
 * Whether the header may have more lines than its first (getHeader's): the framing walk counted more,
 * or did not walk this request's headers. Read in the route's handler, before any await.
 */
export function mayHaveMoreLines(name: string): boolean {
  return countedLines(name) !== 1;
}

/** The header's lines joined by ", " ('' when absent); read in the route's handler, before any await. */
export function headerLines(req: Pick<HttpRequest, 'getHeader' | 'forEach'>, name: string): string {
  const first = req.getHeader(name);
  if (first === '') return '';
  const counted = countedLines(name);
  if (counted === 1) return first;
  let all = '';
  let lines = 0;
  req.forEach((n, value) => {
    if (n === name) all = lines++ === 0 ? value : `${all}, ${value}`;
  });
  return lines > 1 ? all : first;
}
