// @vitest-environment happy-dom
// A field's error is about the value it was given for: fixing the value takes it away at once, even
// when the browser's own checks (How many: 1 to 100) would stop the next submit.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';

vi.hoisted(() => {
  vi.stubGlobal('fetch', async (r: Request) => {
    const url = new URL(r.url);
    if (r.method === 'GET' && url.pathname === '/api/redemption/') {
      return new Response(JSON.stringify({ success: true, message: '', data: { items: [], total: 0, page: 1, page_size: 20 } }), { status: 200, headers: { 'content-type': 'application/json' } });
    }
    return new Response(JSON.stringify({ success: false, message: 'no such endpoint' }), { status: 404 });
  });
});

import { AdminRedemptionsPage } from './redemptions';

afterEach(cleanup);

describe('Create codes', () => {
  it('drops the value\'s error once the value is fixed, while How many is invalid', async () => {
    render(<AdminRedemptionsPage />);
    const value = screen.getByLabelText('Value per code (US dollars)');
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'gift' } });
    fireEvent.input(value, { target: { value: '0' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Create codes' }));
    await waitFor(() => expect(value.getAttribute('aria-invalid')).toBe('true'));
    fireEvent.input(screen.getByLabelText('How many'), { target: { value: '0' } });
    fireEvent.input(value, { target: { value: '1' } });
    await waitFor(() => expect(value.getAttribute('aria-invalid')).toBeNull());
    expect(screen.queryByText('a dollar amount above $0, such as 10 or 2.50')).toBeNull();
  });

  it('names the largest value a code can carry when more is typed', async () => {
    render(<AdminRedemptionsPage />);
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'gift' } });
    fireEvent.input(screen.getByLabelText('Value per code (US dollars)'), { target: { value: '1000000000000' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Create codes' }));
    expect(await screen.findByText('must be at most $18,014,398,509.481982')).toBeTruthy();
  });
});
