// @vitest-environment happy-dom
// The administrators' log page against a stubbed fetch: every account's rows with whose they are and
// their channel, the username and channel filters as the API's query (list and stat), a channel that
// is not an id or a username too long refused next to its field without a call, and an API error
// naming a field shown there.
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/preact';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

// Loaded once fetch is stubbed: the API client takes the fetch there is when it is created.
let adminLogQuery: typeof import('./logs').adminLogQuery;
let AdminLogsPage: typeof import('./logs').AdminLogsPage;
let EMPTY_ADMIN_LOG_FILTERS: typeof import('./logs').EMPTY_ADMIN_LOG_FILTERS;
let readAdminLogView: typeof import('./logs').readAdminLogView;

const seen: URL[] = [];

const entry = (over: Record<string, unknown>) => ({
  id: 1, user_id: 7, created_at: 1_800_000_000, type: 2, content: 'model ratio 1', username: 'ada', token_name: 'k1', model_name: 'm1',
  quota: 500_000, prompt_tokens: 10, completion_tokens: 5, use_time: 1, is_stream: false, channel: 3, token_id: 1, group: 'default',
  request_id: 'req-1', upstream_request_id: '', protocol: 'anthropic', ...over,
});

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

beforeAll(async () => {
  vi.stubGlobal('fetch', async (input: Request) => {
    const url = new URL(input.url);
    seen.push(url);
    const username = url.searchParams.get('username');
    // A rule of the API's the page does not know: its message names the field.
    if (username?.startsWith('refused-')) return answer(400, { success: false, message: 'username: is not a login name' });
    if (url.pathname === '/api/log/') {
      const items = [entry({}), entry({ id: 2, user_id: 9, username: 'bob', channel: 4, request_id: 'req-2', created_at: 1_799_999_990 })]
        .filter((e) => (!username || e.username === username) && (!url.searchParams.has('channel') || e.channel === Number(url.searchParams.get('channel'))));
      return answer(200, { success: true, message: '', data: { items, page: 1, page_size: 20, total: items.length } });
    }
    if (url.pathname === '/api/log/stat') return answer(200, { success: true, message: '', data: { quota: 1_000_000, rpm: 2, tpm: 30 } });
    return answer(404, { success: false, message: 'no such endpoint' });
  });
  ({ adminLogQuery, AdminLogsPage, EMPTY_ADMIN_LOG_FILTERS, readAdminLogView } = await import('./logs'));
});

afterEach(() => {
  cleanup();
  seen.length = 0;
  // The pages keep their filters in the address: the next test starts from none.
  history.replaceState(null, '', '/');
});

describe('adminLogQuery', () => {
  it('leaves empty fields out, trims the username and reads the channel as an id', () => {
    expect(adminLogQuery(EMPTY_ADMIN_LOG_FILTERS, 1, 20)).toEqual({ query: { p: 1, page_size: 20 } });
    expect(adminLogQuery({ ...EMPTY_ADMIN_LOG_FILTERS, username: ' bob ', channel: '4', type: '2' }, 3, 50))
      .toEqual({ query: { p: 3, page_size: 50, type: 2, username: 'bob', channel: 4 } });
    expect(adminLogQuery({ ...EMPTY_ADMIN_LOG_FILTERS, channel: 'four' }, 1, 20)).toEqual({ field: 'channel', error: 'a channel id (digits, from 1)' });
  });

  // The API reads channel=0 as every channel: shown as a filter, it named one the rows did not keep to (review web).
  it('refuses channel 0 in the form, and reads ?channel=0 as no filter', () => {
    expect(adminLogQuery({ ...EMPTY_ADMIN_LOG_FILTERS, channel: '0' }, 1, 20)).toEqual({ field: 'channel', error: 'a channel id (digits, from 1)' });
    expect(readAdminLogView('?channel=0').filters.channel).toBe('');
    expect(readAdminLogView('?channel=7').filters.channel).toBe('7');
  });
});

describe('AdminLogsPage', () => {
  it('lists every account\'s rows with the account and channel, and the usage of the filtered entries', async () => {
    render(<AdminLogsPage />);
    const table = await screen.findByRole('table');
    const headers = within(table).getAllByRole('columnheader').map((h) => h.textContent);
    expect(headers).toEqual(expect.arrayContaining(['Account', 'Channel']));
    // Each entry is a body of its own: its columns' row, then its details' row.
    const rows = [...table.querySelectorAll<HTMLElement>('tbody.entry > tr:first-child')];
    expect(rows.map((r) => within(r).getAllByRole('cell')[1]!.textContent)).toEqual(['ada', 'bob']);
    expect(rows.map((r) => within(r).getAllByRole('cell')[5]!.textContent)).toEqual(['3', '4']);
    expect((await screen.findByLabelText('Usage of the filtered entries')).textContent).toContain('$2.00');
  });

  it('sends the username and channel filters to the list and to the stat', async () => {
    render(<AdminLogsPage />);
    await screen.findByRole('table');
    seen.length = 0;
    fireEvent.input(screen.getByLabelText('Account username'), { target: { value: 'bob' } });
    fireEvent.input(screen.getByLabelText('Channel id'), { target: { value: '4' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    await waitFor(() => expect(document.querySelectorAll('table.logs tbody.entry')).toHaveLength(1));
    const list = seen.find((u) => u.pathname === '/api/log/')!;
    expect(Object.fromEntries(list.searchParams)).toEqual({ p: '1', page_size: '20', username: 'bob', channel: '4' });
    const stat = seen.find((u) => u.pathname === '/api/log/stat')!;
    expect(Object.fromEntries(stat.searchParams)).toEqual({ username: 'bob', channel: '4' });
  });

  it('sends the request id filters to the stat too, so its sum is the listed request\'s', async () => {
    render(<AdminLogsPage />);
    await screen.findByRole('table');
    seen.length = 0;
    fireEvent.input(screen.getByLabelText('Request ID'), { target: { value: 'req-1' } });
    fireEvent.input(screen.getByLabelText('Upstream request ID'), { target: { value: 'up-1' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    await waitFor(() => expect(seen.some((u) => u.pathname === '/api/log/stat')).toBe(true));
    const stat = seen.find((u) => u.pathname === '/api/log/stat')!;
    expect(Object.fromEntries(stat.searchParams)).toEqual({ request_id: 'req-1', upstream_request_id: 'up-1' });
  });

  it('refuses a channel that is not an id next to its field, without a call', async () => {
    render(<AdminLogsPage />);
    await screen.findByRole('table');
    seen.length = 0;
    fireEvent.input(screen.getByLabelText('Channel id'), { target: { value: 'four' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('a channel id (digits, from 1)')).toBeTruthy();
    expect(screen.getByLabelText('Channel id').getAttribute('aria-invalid')).toBe('true');
    expect(seen).toEqual([]);
  });

  it('shows an API error naming the username next to that field', async () => {
    render(<AdminLogsPage />);
    await screen.findByRole('table');
    fireEvent.input(screen.getByLabelText('Account username'), { target: { value: 'refused-name' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('is not a login name')).toBeTruthy();
    expect(screen.getByLabelText('Account username').getAttribute('aria-invalid')).toBe('true');
  });

  it('refuses a username longer than the API takes next to its field, without a call', async () => {
    render(<AdminLogsPage />);
    await screen.findByRole('table');
    seen.length = 0;
    fireEvent.input(screen.getByLabelText('Account username'), { target: { value: 'x'.repeat(65) } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('must be at most 64 characters')).toBeTruthy();
    expect(screen.getByLabelText('Account username').getAttribute('aria-invalid')).toBe('true');
    expect(seen).toEqual([]);
    expect(location.search).toBe('');
  });
});
