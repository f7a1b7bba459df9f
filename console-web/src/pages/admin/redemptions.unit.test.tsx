// @vitest-environment happy-dom
// The list carries codes masked; Show fetches one code from its reveal endpoint. An unused code past
// its expired_time reads "Expired".
import { cleanup, fireEvent, render, screen } from '@testing-library/preact';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

const CODE = '0123456789abcdef0123456789abcdef';
const MASK = '0123********cdef';
const revealed: string[] = [];
const NOW = Math.floor(Date.now() / 1000);
const item = (id: number, status: number, expired_time: number) => ({
  id, user_id: 1, name: `code ${id}`, key: `${id}abc********wxyz`, status, quota: 500_000, created_time: 1_700_000_000,
  redeemed_time: status === 3 ? 1_700_000_100 : 0, used_user_id: status === 3 ? 9 : 0, expired_time,
});

function answer(body: unknown): Response {
  return new Response(JSON.stringify({ success: true, message: '', data: body }), { status: 200, headers: { 'content-type': 'application/json' } });
}

beforeAll(() => {
  vi.stubGlobal('fetch', async (input: Request) => {
    const url = new URL(input.url);
    if (input.method === 'GET' && url.pathname === '/api/redemption/') {
      return answer({
        items: [
          { id: 5, user_id: 1, name: 'gift', key: MASK, status: 1, quota: 500_000, created_time: 1_800_000_000, redeemed_time: 0, used_user_id: 0, expired_time: -1 },
          item(6, 1, NOW - 3600), item(7, 1, NOW + 3600), item(8, 1, 0), item(9, 3, NOW - 3600), item(10, 2, NOW - 3600),
        ],
        total: 6, page: 1, page_size: 20,
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

describe('codeStatus', () => {
  const now = 1_800_000_000;
  // Imported after fetch is stubbed (above).
  let codeStatus: typeof import('./redemptions').codeStatus;
  beforeAll(async () => { ({ codeStatus } = await import('./redemptions')); });

  it('an unused code past its expired_time is Expired; -1 and 0 never expire', () => {
    expect(codeStatus({ status: 1, expired_time: now - 1 }, now)).toBe('Expired');
    // Redeemable only while expired_time > now (console-api's redemption): at that second it is expired.
    expect(codeStatus({ status: 1, expired_time: now }, now)).toBe('Expired');
    expect(codeStatus({ status: 1, expired_time: now + 1 }, now)).toBe('Unused');
    expect(codeStatus({ status: 1, expired_time: -1 }, now)).toBe('Unused');
    expect(codeStatus({ status: 1, expired_time: 0 }, now)).toBe('Unused');
  });

  it('a used or disabled code keeps its status, expired or not', () => {
    expect(codeStatus({ status: 3, expired_time: now - 1 }, now)).toBe('Used');
    expect(codeStatus({ status: 2, expired_time: now - 1 }, now)).toBe('Disabled');
    expect(codeStatus({ status: 7, expired_time: -1 }, now)).toBe('7');
  });

  it('the list shows it in the Status column', async () => {
    const { AdminRedemptionsPage } = await import('./redemptions');
    render(<AdminRedemptionsPage />);
    await screen.findByText(MASK);
    const status = (id: number) => {
      const cells = screen.getByText(`code ${id}`).closest('tr')!.querySelectorAll('td');
      return cells[4]!.textContent;
    };
    expect(status(6)).toBe('Expired');
    expect(status(7)).toBe('Unused');
    expect(status(8)).toBe('Unused');
    expect(status(9)).toBe('Used');
    expect(status(10)).toBe('Disabled');
  });
});
