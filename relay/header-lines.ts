// A header's value over all its lines: uWS's getHeader gives the first line only, where HTTP (RFC 9110
// §5.3) reads several lines of a list header as one value joined by commas, as proxies and clients
// may send them (`anthropic-beta` once per beta, `x-forwarded-for` once per hop). The walk over every
// header is made only when the header is there at all.
import type { HttpRequest } from 'uWebSockets.js';

export function headerLines(req: Pick<HttpRequest, 'getHeader' | 'forEach'>, name: string): string {
  const first = req.getHeader(name);
  if (first === '') return '';
  let all = '';
  let lines = 0;
  req.forEach((n, value) => {
    if (n === name) all = lines++ === 0 ? value : `${all}, ${value}`;
  });
  return lines > 1 ? all : first;
}
