// @vitest-environment happy-dom
// The list carries codes masked; Show fetches one code from its reveal endpoint.
import { cleanup, fireEvent, render, screen } from '@testing-library/preact';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

const CODE = '0123456789abcdef0123456789abcdef';
const MASK = '0123********cdef';
const revealed: string[] = [];

function answer(body: unknown): Response {
  return new Response(JSON.stringify({ success: true, message: '', data: body }), { status: 200, headers: { 'content-type': 'application/json' } });
}

beforeAll(() => {
  vi.stubGlobal('fetch', async (input: Request) => {
    const url = new URL(input.url);
    if (input.method === 'GET' && url.pathname === '/api/redemption/') {
      return answer({
        items: [{ id: 5, user_id: 1, name: 'gift', key: MASK, status: 1, quota: 500_000, created_time: 1_800_000_000, redeemed_time: 0, used_user_id: 0, expired_time: -1 }],
        total: 1, page: 1, page_size: 20,
      });
    }
    if (input.method === 'POST' && url.pathname === '/api/redemption/5/key') {
      revealed.push(url.pathname);
      return answer({ key: CODE });
    }
    return new Response(JSON.stringify({ success: false, message: 'no such endpoint' }), { status: 404 });
  });
});

afterEach(cleanup);

describe('AdminRedemptionsPage', () => {
  it('lists a code masked and shows it in full only when asked', async () => {
    // Imported after fetch is stubbed: the API client keeps the fetch it found.
    const { AdminRedemptionsPage } = await import('./redemptions');
    render(<AdminRedemptionsPage />);
    expect(await screen.findByText(MASK)).toBeTruthy();
    expect(screen.queryByText(CODE)).toBeNull();
    expect(revealed).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Show code 5' }));
    expect(await screen.findByText(CODE)).toBeTruthy();
    expect(revealed).toEqual(['/api/redemption/5/key']);
    expect(screen.getByRole('button', { name: 'Copy' })).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Show code 5' })).toBeNull();
  });
});
