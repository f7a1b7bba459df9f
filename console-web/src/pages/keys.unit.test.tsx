// @vitest-environment happy-dom
// Each key's row copies the full key, fetched from POST /api/token/:id/key only when asked for; a key
// deleted meanwhile (404) or too many requests (429) says so next to the button.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/client';
import { KeysPage, keyCopyError, keyGroupText } from './keys';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s: { handle?: (r: Request) => Promise<Response> } = {};
  vi.stubGlobal('fetch', (r: Request) => (s.handle ? s.handle(r) : Promise.reject(new Error('no fetch here'))));
  return s;
});

const FULL = 'sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH';
const row = (id: number, name: string) => ({
  id, user_id: 7, name, key: `sk-${name.slice(0, 4).padEnd(4, 'x')}********wxyz`, status: 1, created_time: 1, accessed_time: 0, expired_time: -1,
  remain_quota: 1_000_000, unlimited_quota: false, used_quota: 0, model_limits_enabled: false, model_limits: '', allow_ips: null,
  group: '', cross_group_retry: false, rate_limit_rpm: 0, rate_limit_tpm: 0,
});
const answer = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const reveals: string[] = [];
const written: string[] = [];
let writeText: (text: string) => Promise<void>;

beforeAll(() => {
  server.handle = async (input: Request) => {
    const path = new URL(input.url).pathname;
    if (input.method === 'POST' && /^\/api\/token\/\d+\/key$/.test(path)) {
      reveals.push(path);
      if (path === '/api/token/1/key') return answer(200, { success: true, message: '', data: { key: FULL } });
      if (path === '/api/token/2/key') return answer(404, { success: false, message: 'API key not found' });
      return answer(429, { success: false, message: 'too many requests, slow down' });
    }
    if (input.method === 'GET' && path === '/api/token/') {
      return answer(200, { success: true, message: '', data: { items: [{ ...row(1, 'laptop'), allow_ips: '10.0.0.0/8,192.0.2.7' }, row(2, 'gone'), row(3, 'busy')], total: 3, page: 1, page_size: 10 } });
    }
    if (path === '/api/user/self/groups') return answer(200, { success: true, message: '', data: {} });
    return answer(404, { success: false, message: 'no such endpoint' });
  };
  Object.defineProperty(navigator, 'clipboard', { configurable: true, value: { writeText: (t: string) => writeText(t) } });
});
afterAll(() => { server.handle = undefined; });
afterEach(() => {
  cleanup();
  reveals.length = 0;
  written.length = 0;
});

describe('KeysPage: Copy key on each row', () => {
  it('fetches the key only when asked for and copies it, with the creation dialog\'s "Copied"', async () => {
    writeText = async (t) => { written.push(t); };
    render(<KeysPage />);
    const copy = await screen.findByRole('button', { name: 'Copy key laptop' });
    expect(reveals).toEqual([]);
    fireEvent.click(copy);
    await screen.findByRole('button', { name: 'Copied laptop' });
    expect(reveals).toEqual(['/api/token/1/key']);
    expect(written).toEqual([FULL]);
    // Copied, not shown: the page holds no full key, and no other row was touched.
    expect(document.body.innerHTML).not.toContain(FULL);
    expect(screen.getByRole('button', { name: 'Copy key gone' })).toBeTruthy();
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('where copying fails, shows the fetched key selected for Ctrl+C', async () => {
    writeText = () => Promise.reject(new Error('not allowed'));
    render(<KeysPage />);
    fireEvent.click(await screen.findByRole('button', { name: 'Copy key laptop' }));
    expect((await screen.findByRole('alert')).textContent).toMatch(/Copying failed/);
    const field = screen.getByRole('textbox', { name: 'Text to copy' }) as HTMLInputElement;
    expect(field.value).toBe(FULL);
    expect(screen.getByRole('button', { name: 'Copy key laptop' })).toBeTruthy();
  });

  it('a key deleted meanwhile (404) says so next to its button, and copies nothing', async () => {
    writeText = async (t) => { written.push(t); };
    render(<KeysPage />);
    fireEvent.click(await screen.findByRole('button', { name: 'Copy key gone' }));
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toBe('The key could not be copied: it no longer exists (deleted elsewhere?). Reload the list.');
    expect(alert.closest('tr')?.textContent).toContain('gone');
    expect(written).toEqual([]);
    // The button is usable again, and a retry that fails the same way shows one message.
    const again = screen.getByRole('button', { name: 'Copy key gone' }) as HTMLButtonElement;
    expect(again.disabled).toBe(false);
    fireEvent.click(again);
    await waitFor(() => expect(reveals).toHaveLength(2));
    await waitFor(() => expect(screen.getAllByRole('alert')).toHaveLength(1));
  });

  it('too many requests (429) asks to wait and retry', async () => {
    writeText = async (t) => { written.push(t); };
    render(<KeysPage />);
    fireEvent.click(await screen.findByRole('button', { name: 'Copy key busy' }));
    expect((await screen.findByRole('alert')).textContent).toBe('The key could not be copied: too many requests. Wait a moment and try again.');
    expect(written).toEqual([]);
  });

  it('words other failures with the API\'s message', () => {
    expect(keyCopyError(new ApiError('internal server error', 500))).toBe('The key could not be copied: internal server error');
    expect(keyCopyError(new ApiError('the console could not be reached (offline)', 0))).toBe('The key could not be copied: the console could not be reached (offline)');
  });
});

describe('KeysPage: a new key', () => {
  it('is shown once created, and the page says the row copies it again (not "shown only this once")', async () => {
    const base = server.handle!;
    let created = false;
    server.handle = async (input: Request) => {
      const path = new URL(input.url).pathname;
      if (input.method === 'POST' && path === '/api/token/') {
        created = true;
        return answer(200, { success: true, message: '', data: null });
      }
      if (input.method === 'GET' && path === '/api/token/' && created) {
        return answer(200, { success: true, message: '', data: { items: [row(1, 'laptop')], total: 1, page: 1, page_size: 20 } });
      }
      return base(input);
    };
    try {
      render(<KeysPage />);
      fireEvent.click(await screen.findByRole('button', { name: 'Create key' }));
      fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'laptop' } });
      fireEvent.submit(screen.getByRole('form', { name: 'Create key' }));
      const region = await screen.findByRole('region', { name: 'New API key' });
      expect(screen.getByTestId('new-key').textContent).toBe(FULL);
      expect(region.textContent).not.toMatch(/only this once/);
      expect(region.textContent).toContain('Copy key button there copies it again');
    } finally {
      server.handle = base;
    }
  });
});

describe('KeysPage: a search the API refuses', () => {
  it('stops the field at the API\'s bound, 50 characters', async () => {
    render(<KeysPage />);
    // listTokensQuery's keyword is queryString(50) (console-api/routes/token.ts).
    expect((screen.getByLabelText('Search by name') as HTMLInputElement).maxLength).toBe(50);
  });

  it('shows no rows of the previous search under it, and no "No keys … yet"', async () => {
    const base = server.handle!;
    server.handle = async (input: Request) => {
      const url = new URL(input.url);
      const keyword = url.searchParams.get('keyword');
      if (input.method === 'GET' && url.pathname === '/api/token/' && keyword !== null && keyword.length > 50) {
        return answer(400, { success: false, message: 'keyword: must be at most 50 characters' });
      }
      return base(input);
    };
    try {
      render(<KeysPage />);
      await screen.findByRole('button', { name: 'Copy key laptop' });
      const field = screen.getByLabelText('Search by name') as HTMLInputElement;
      // A value set past the attribute (as a script could): the API refuses it.
      fireEvent.input(field, { target: { value: 'z'.repeat(51) } });
      fireEvent.submit(screen.getByRole('form', { name: 'Search keys' }));
      await screen.findByText(/must be at most 50 characters/);
      expect(screen.queryByRole('button', { name: 'Copy key laptop' })).toBeNull();
      expect(screen.queryByRole('table')).toBeNull();
      expect(document.body.textContent).not.toMatch(/No keys/);
      expect(screen.queryByRole('navigation', { name: 'Key pages' })).toBeNull();
      expect(document.body.textContent).not.toMatch(/in all/);
    } finally {
      server.handle = base;
    }
  });
});

describe('the Group column', () => {
  it('names the group and each limit the key has: models, the addresses it is accepted from, its own rates', () => {
    const k = row(9, 'limited');
    expect(keyGroupText(k)).toBe('—');
    expect(keyGroupText({ ...k, group: 'vip', model_limits_enabled: true, model_limits: 'claude-haiku-4-5,gpt-4o' })).toBe('vip · models: claude-haiku-4-5,gpt-4o');
    expect(keyGroupText({ ...k, allow_ips: '10.0.0.0/8,192.0.2.7' })).toBe('— · from: 10.0.0.0/8, 192.0.2.7');
    expect(keyGroupText({ ...k, group: 'default', rate_limit_rpm: 1200, rate_limit_tpm: 50_000 })).toBe('default · 1,200 requests/min · 50,000 tokens/min');
  });

  it('is shown in the key\'s row', async () => {
    render(<KeysPage />);
    await screen.findByRole('button', { name: 'Copy key laptop' });
    expect(screen.getByText('— · from: 10.0.0.0/8, 192.0.2.7')).toBeTruthy();
    expect(screen.getAllByText('—').length).toBe(2);
  });
});
