// @vitest-environment happy-dom
// The log pages keep their view in the address, against a stubbed fetch: opened at an address they
// show its page and filters (and ask the API for them); Next, the page jump, Apply filters, Clear and
// Rows per page each add a history entry that Back returns from, form and rows included; an address
// with unusable values, or past the last page, is corrected in place rather than sent.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { toLocalInput } from '../format';

// Loaded once fetch is stubbed: the API client takes the fetch there is when it is created.
let LogsPage: typeof import('./logs').LogsPage;
let AdminLogsPage: typeof import('./admin/logs').AdminLogsPage;

const JAN_2 = 1_767_322_800;
const TOTAL = 95;
const seen: URL[] = [];

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

/** The list requests' parameters, in order. */
const reads = (path = '/api/log/self') => seen.filter((u) => u.pathname === path).map((u) => Object.fromEntries(u.searchParams));

beforeAll(async () => {
  vi.stubGlobal('fetch', async (input: Request) => {
    const url = new URL(input.url);
    seen.push(url);
    if (url.pathname === '/api/log/self' || url.pathname === '/api/log/') {
      // TOTAL rows, newest first; the page asked for, empty past the last.
      const page = Number(url.searchParams.get('p') ?? 1);
      const size = Number(url.searchParams.get('page_size') ?? 10);
      const items = Array.from({ length: Math.max(0, Math.min(size, TOTAL - (page - 1) * size)) }, (_, i) => {
        const n = (page - 1) * size + i + 1;
        return {
          id: n, user_id: 7, created_at: JAN_2 - n, type: 2, content: '', username: 'ada', token_name: 'k', model_name: 'm1', quota: 100,
          prompt_tokens: 1, completion_tokens: 1, use_time: 1, is_stream: false, channel: 4, token_id: 1, group: 'default',
          request_id: `req-${n}`, upstream_request_id: '', protocol: 'anthropic',
        };
      });
      return answer(200, { success: true, message: '', data: { items, page, page_size: size, total: TOTAL } });
    }
    if (url.pathname === '/api/log/stat') return answer(200, { success: true, message: '', data: { quota: 1_000_000, rpm: 2, tpm: 30 } });
    return answer(404, { success: false, message: 'no such endpoint' });
  });
  ({ LogsPage } = await import('./logs'));
  ({ AdminLogsPage } = await import('./admin/logs'));
});

beforeEach(() => {
  history.replaceState(null, '', '/logs');
});

afterEach(() => {
  cleanup();
  seen.length = 0;
  history.replaceState(null, '', '/');
});

const field = (label: string) => screen.getByLabelText(label) as HTMLInputElement;
const settle = () => new Promise((r) => setTimeout(r, 30));

describe('LogsPage and its address', () => {
  it('opens the view an address names: page, page size and filters, in the form and in the query', async () => {
    history.replaceState(null, '', `/logs?type=2&model_name=m1&start_timestamp=${JAN_2}&p=3&page_size=10`);
    render(<LogsPage />);
    await screen.findByText('Page 3 of 10 (95 in all)');
    expect(reads()).toEqual([{ type: '2', model_name: 'm1', start_timestamp: String(JAN_2), p: '3', page_size: '10' }]);
    expect(screen.getByText('req-21')).toBeTruthy();
    expect(field('Model').value).toBe('m1');
    expect(field('From').value).toBe(toLocalInput(JAN_2));
    expect((screen.getByLabelText('Type') as HTMLSelectElement).value).toBe('2');
    expect((screen.getByLabelText('Rows per page') as HTMLSelectElement).value).toBe('10');
  });

  it('writes each change to the address as a history entry; Back and Forward restore page, form and rows', async () => {
    render(<LogsPage />);
    await screen.findByText('Page 1 of 5 (95 in all)');
    const start = history.length;
    fireEvent.click(screen.getByRole('button', { name: 'Next' }));
    await screen.findByText('Page 2 of 5 (95 in all)');
    expect(location.search).toBe('?p=2');
    expect(screen.getByText('req-21')).toBeTruthy();

    fireEvent.input(field('Model'), { target: { value: ' m1 ' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    await screen.findByText('Page 1 of 5 (95 in all)');
    expect(location.search).toBe('?model_name=m1');

    fireEvent.input(field('Go to page'), { target: { value: '4' } });
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    await screen.findByText('Page 4 of 5 (95 in all)');
    expect(location.search).toBe('?model_name=m1&p=4');
    expect(history.length).toBe(start + 3);

    history.back();
    await screen.findByText('Page 1 of 5 (95 in all)');
    expect(location.search).toBe('?model_name=m1');
    expect(field('Model').value).toBe('m1');
    history.back();
    await screen.findByText('Page 2 of 5 (95 in all)');
    await waitFor(() => expect(field('Model').value).toBe(''));
    expect(reads().at(-1)).toEqual({ p: '2', page_size: '20' });
    expect(screen.getByText('req-21')).toBeTruthy();
    history.forward();
    await waitFor(() => expect(field('Model').value).toBe('m1'));
    await screen.findByText('Page 1 of 5 (95 in all)');
    expect(reads().at(-1)).toEqual({ model_name: 'm1', p: '1', page_size: '20' });
  });

  it('keeps what is being typed in the form when only the page changes', async () => {
    render(<LogsPage />);
    await screen.findByText('Page 1 of 5 (95 in all)');
    fireEvent.input(field('Model'), { target: { value: 'typed, not applied' } });
    fireEvent.click(screen.getByRole('button', { name: 'Next' }));
    await screen.findByText('Page 2 of 5 (95 in all)');
    expect(field('Model').value).toBe('typed, not applied');
    expect(location.search).toBe('?p=2');
  });

  it('reads unusable values as their defaults, sends none of them, and corrects the address in place', async () => {
    history.replaceState(null, '', '/logs?p=-1&page_size=7&type=99&start_timestamp=notanumber&end_timestamp=99999999999999&model_name=%00&group=vip');
    const entries = history.length;
    render(<LogsPage />);
    await screen.findByText('Page 1 of 5 (95 in all)');
    expect(reads()).toEqual([{ group: 'vip', p: '1', page_size: '20' }]);
    await waitFor(() => expect(location.search).toBe('?group=vip'));
    expect(history.length).toBe(entries);
    expect(field('Group').value).toBe('vip');
    expect(field('From').value).toBe('');
    expect(field('Model').value).toBe('');
  });

  it('an address past the last page moves to the last page, replacing the entry (Back does not return to it)', async () => {
    history.replaceState(null, '', '/logs?p=50');
    const entries = history.length;
    render(<LogsPage />);
    await screen.findByText('Page 5 of 5 (95 in all)');
    await waitFor(() => expect(location.search).toBe('?p=5'));
    expect(history.length).toBe(entries);
    await screen.findByText('req-95');
    expect(reads().map((q) => q.p)).toEqual(['50', '5']);
  });

  it('Rows per page keeps the first row shown in sight, in the address', async () => {
    history.replaceState(null, '', '/logs?p=3');
    render(<LogsPage />);
    await screen.findByText('req-41');
    fireEvent.change(screen.getByLabelText('Rows per page'), { target: { value: '10' } });
    await screen.findByText('Page 5 of 10 (95 in all)');
    expect(location.search).toBe('?p=5&page_size=10');
    expect(screen.getByText('req-41')).toBeTruthy();
  });

  it('Clear empties the filters and the address but the page size', async () => {
    history.replaceState(null, '', `/logs?model_name=m1&end_timestamp=${JAN_2}&p=2&page_size=50`);
    render(<LogsPage />);
    await screen.findByText('Page 2 of 2 (95 in all)');
    fireEvent.click(screen.getByRole('button', { name: 'Clear' }));
    await screen.findByText('Page 1 of 2 (95 in all)');
    expect(location.search).toBe('?page_size=50');
    expect(field('Model').value).toBe('');
    expect(field('To').value).toBe('');
  });

  it('a refused form changes neither the address nor the rows', async () => {
    render(<LogsPage />);
    await screen.findByText('Page 1 of 5 (95 in all)');
    fireEvent.input(field('Request ID'), { target: { value: 'r'.repeat(201) } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    expect(await screen.findByText('must be at most 200 characters')).toBeTruthy();
    expect(field('Request ID').getAttribute('aria-invalid')).toBe('true');
    await settle();
    expect(location.search).toBe('');
    expect(reads()).toHaveLength(1);
  });
});

describe('AdminLogsPage and its address', () => {
  it('opens the account, channel and page of the address; a page change reads the list, not the figures', async () => {
    history.replaceState(null, '', '/admin/logs?username=bob&channel=4&p=2');
    render(<AdminLogsPage />);
    await screen.findByText('Page 2 of 5 (95 in all)');
    expect(field('Account username').value).toBe('bob');
    expect(field('Channel id').value).toBe('4');
    expect(reads('/api/log/')).toEqual([{ username: 'bob', channel: '4', p: '2', page_size: '20' }]);
    await waitFor(() => expect(reads('/api/log/stat')).toEqual([{ username: 'bob', channel: '4' }]));

    fireEvent.click(screen.getByRole('button', { name: 'Next' }));
    await screen.findByText('Page 3 of 5 (95 in all)');
    expect(location.search).toBe('?username=bob&channel=4&p=3');
    await settle();
    expect(reads('/api/log/stat')).toHaveLength(1);

    fireEvent.input(field('Channel id'), { target: { value: '' } });
    fireEvent.click(screen.getByRole('button', { name: 'Apply filters' }));
    await waitFor(() => expect(location.search).toBe('?username=bob'));
    history.back();
    await waitFor(() => expect(field('Channel id').value).toBe('4'));
    await screen.findByText('Page 3 of 5 (95 in all)');
    expect(reads('/api/log/').at(-1)).toEqual({ username: 'bob', channel: '4', p: '3', page_size: '20' });
  });

  it('drops a channel that is no id and a username too long, without sending them', async () => {
    history.replaceState(null, '', `/admin/logs?username=${'u'.repeat(65)}&channel=abc&p=abc`);
    render(<AdminLogsPage />);
    await screen.findByText('Page 1 of 5 (95 in all)');
    expect(reads('/api/log/')).toEqual([{ p: '1', page_size: '20' }]);
    await waitFor(() => expect(location.search).toBe(''));
    expect(field('Channel id').value).toBe('');
  });
});

describe('two Backs in quick succession', () => {
  it('leave the address the second reached: the first view\'s correction does not rewrite it', async () => {
    // An address that is not canonical (its order), read by the page; before its correction runs,
    // the address moves on (a second Back), as a busy browser delivers two popstates at once.
    render(<LogsPage />);
    await waitFor(() => expect(reads()).toHaveLength(1));
    history.pushState(null, '', '/logs?page_size=50&model_name=m1');
    dispatchEvent(new PopStateEvent('popstate'));
    history.pushState(null, '', '/logs?model_name=m2');
    await new Promise((r) => setTimeout(r, 50));
    expect(location.search).toBe('?model_name=m2');
    // The page catches up with the address it is at.
    dispatchEvent(new PopStateEvent('popstate'));
    await waitFor(() => expect(field('Model').value).toBe('m2'));
    expect(location.search).toBe('?model_name=m2');
  });
});
