// @vitest-environment happy-dom
// The Usage logs page against a stubbed fetch: a "From" before 1970 is refused next to its field in
// words, without calling the API (which would answer "start_timestamp: must be at least 0"); and when
// a query fails, the rows of the previous one leave the screen with it.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

// Loaded once fetch is stubbed: the API client takes the fetch there is when it is created.
let LogsPage: typeof import('./logs').LogsPage;
let AdminLogsPage: typeof import('./admin/logs').AdminLogsPage;

const seen: URL[] = [];

const entry = (over: Record<string, unknown>) => ({
  id: 1, user_id: 7, created_at: 1_800_000_000, type: 1, content: 'redeemed', username: 'ada', token_name: '', model_name: '',
  quota: 500_000, prompt_tokens: 0, completion_tokens: 0, use_time: 0, is_stream: false, channel: 0, token_id: 0, group: 'default',
  request_id: 'req-previous', upstream_request_id: '', protocol: '', ...over,
});

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

beforeAll(async () => {
  vi.stubGlobal('fetch', async (input: Request) => {
    const url = new URL(input.url);
    seen.push(url);
    // A filter the stub cannot serve: the log store is unavailable for it.
    if (url.searchParams.get('model_name') === 'broken') {
      return answer(503, { success: false, message: 'the log store is not answering; retry in 5 s' });
    }
    if (url.pathname === '/api/log/self' || url.pathname === '/api/log/') {
      const items = [entry({})];
      return answer(200, { success: true, message: '', data: { items, page: 1, page_size: 20, total: items.length } });
    }
    if (url.pathname === '/api/log/stat') return answer(200, { success: true, message: '', data: { quota: 1_000_000, rpm: 2, tpm: 30 } });
    return answer(404, { success: false, message: 'no such endpoint' });
  });
  ({ LogsPage } = await import('./logs'));
  ({ AdminLogsPage } = await import('./admin/logs'));
});

afterEach(() => {
  cleanup();
  seen.length = 0;
  // The pages keep their filters in the address: the next test starts from none.
  history.replaceState(null, '', '/');
});

describe('LogsPage', () => {
  it('refuses a "From" before 1970 next to the field, in words, without calling the API', async () => {
    render(<LogsPage />);
    await screen.findByText('req-previous');
    seen.length = 0;
    fireEvent.input(screen.getByLabelText('From'), { target: { value: '1969-06-01T00:00' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('must be 1970-01-01 00:00 UTC or later')).toBeTruthy();
    expect(screen.getByLabelText('From').getAttribute('aria-invalid')).toBe('true');
    await new Promise((r) => setTimeout(r, 50));
    expect(seen).toEqual([]);
    expect(screen.queryByText(/start_timestamp/)).toBeNull();
  });

  it('clears the previous rows when a query fails', async () => {
    render(<LogsPage />);
    await screen.findByText('req-previous');
    fireEvent.input(screen.getByLabelText('Model'), { target: { value: 'broken' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('the log store is not answering; retry in 5 s')).toBeTruthy();
    expect(screen.queryByText('req-previous')).toBeNull();
    expect(screen.queryByRole('table')).toBeNull();
    // A query that works shows rows again.
    fireEvent.input(screen.getByLabelText('Model'), { target: { value: '' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    await screen.findByText('req-previous');
  });
});

describe('AdminLogsPage', () => {
  it('refuses a "From" before 1970 next to the field, without calling the API', async () => {
    render(<AdminLogsPage />);
    await screen.findByText('req-previous');
    seen.length = 0;
    fireEvent.input(screen.getByLabelText('From'), { target: { value: '1969-06-01T00:00' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('must be 1970-01-01 00:00 UTC or later')).toBeTruthy();
    expect(seen).toEqual([]);
  });

  it('clears the previous rows and usage when a query fails', async () => {
    render(<AdminLogsPage />);
    await screen.findByText('req-previous');
    await screen.findByLabelText('Usage of the filtered entries');
    fireEvent.input(screen.getByLabelText('Model'), { target: { value: 'broken' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('the log store is not answering; retry in 5 s')).toBeTruthy();
    await waitFor(() => expect(screen.queryByLabelText('Usage of the filtered entries')).toBeNull());
    expect(screen.queryByText('req-previous')).toBeNull();
  });
});
