import { describe, expect, it } from 'vitest';
import { countListHeaderLine, headerLines, startListHeaderCount } from './header-lines.js';

/** A uWS request's header access over `lines`, counting the walks made. */
function request(lines: [string, string][]) {
  const req = {
    walks: 0,
    getHeader: (name: string) => lines.find(([n]) => n === name)?.[1] ?? '',
    forEach(cb: (name: string, value: string) => void) {
      req.walks++;
      for (const [n, v] of lines) cb(n, v);
    },
  };
  return req;
}

/** What server.ts's framing walk does: reset the counts, then count each line. */
function framingWalk(lines: [string, string][]): void {
  startListHeaderCount(true);
  for (const [n] of lines) countListHeaderLine(n);
}

describe('headerLines', () => {
  const twoBetas: [string, string][] = [['content-length', '2'], ['anthropic-beta', 'a-1'], ['x-forwarded-for', '10.0.0.1'], ['anthropic-beta', 'b-2']];

  it('joins a list header\'s lines in order, whether or not the framing walk counted them', () => {
    framingWalk(twoBetas);
    expect(headerLines(request(twoBetas), 'anthropic-beta')).toBe('a-1, b-2');
    startListHeaderCount(false);
    expect(headerLines(request(twoBetas), 'anthropic-beta')).toBe('a-1, b-2');
    expect(headerLines(request(twoBetas), 'x-forwarded-for')).toBe('10.0.0.1');
    expect(headerLines(request(twoBetas), 'x-absent')).toBe('');
  });

  it('walks no second time for a header the framing walk counted once', () => {
    const one: [string, string][] = [['content-length', '2'], ['anthropic-beta', 'a-1,b-2'], ['x-forwarded-for', '10.0.0.1']];
    framingWalk(one);
    const req = request(one);
    expect(headerLines(req, 'anthropic-beta')).toBe('a-1,b-2');
    expect(headerLines(req, 'x-forwarded-for')).toBe('10.0.0.1');
    expect(req.walks).toBe(0);
    // A request whose headers were not walked for framing: walked here.
    startListHeaderCount(false);
    const unwalked = request(one);
    expect(headerLines(unwalked, 'anthropic-beta')).toBe('a-1,b-2');
    expect(unwalked.walks).toBe(1);
  });
});
