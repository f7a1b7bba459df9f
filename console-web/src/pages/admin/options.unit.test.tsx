// @vitest-environment happy-dom
// Options are the super administrator's (every write_role is 100, as new-api's RootAuth): an
// administrator (10) reads the page with a note saying so, every field disabled and no Save or Clear;
// root edits them.
import { cleanup, render, screen } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../../api/types';

const OPTIONS = [
  { key: 'ModelRatio', value: '{"claude-x":2}', secret: false, configured: true, write_role: 100, description: 'model ratios' },
  { key: 'GroupRatio', value: '{"default":1,"vip":1,"svip":1}', secret: false, configured: true, write_role: 100, description: 'group ratios' },
  { key: 'TopUpLink', value: 'https://shop.example/topup', secret: false, configured: true, write_role: 100, description: 'external top-up link' },
  { key: 'EpayKey', value: '', secret: true, configured: true, write_role: 100, description: 'epay merchant key' },
];

vi.hoisted(() => {
  vi.stubGlobal('fetch', async (r: Request) => {
    const url = new URL(r.url);
    const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    if (url.pathname === '/api/option/' && r.method === 'GET') return reply(200, { success: true, message: '', data: OPTIONS });
    return reply(404, { success: false, message: 'no such endpoint' });
  });
});

import { AdminOptionsPage, READ_ONLY_OPTIONS_NOTE } from './options';

afterEach(() => { cleanup(); });

/** The field of an option (its form carries the same name). */
const FIELD = { selector: 'input, textarea' };
const account = (role: number) => ({ id: 1, username: 'who', display_name: 'who', role, status: 1, group: 'default', quota: 0, used_quota: 0, request_count: 0 }) as unknown as Account;

describe('AdminOptionsPage', () => {
  it('is read-only for an administrator (10): a note, every field disabled, no Save or Clear', async () => {
    render(<AdminOptionsPage account={account(10)} refreshAccount={() => {}} />);
    await screen.findByLabelText('ModelRatio', FIELD);
    expect(screen.getByRole('note').textContent).toBe(READ_ONLY_OPTIONS_NOTE);
    for (const key of ['ModelRatio', 'GroupRatio', 'TopUpLink', 'EpayKey']) {
      expect((screen.getByLabelText(key, FIELD) as HTMLInputElement).disabled, key).toBe(true);
    }
    expect(screen.queryAllByRole('button', { name: /^(Save|Clear) / })).toEqual([]);
    // A secret's hint does not invite typing a new value the API would refuse.
    expect(screen.getByText('configured')).toBeTruthy();
    expect(screen.queryByText(/type a new value to replace it/)).toBeNull();
  });

  it('is editable for the super administrator (100), with no read-only note', async () => {
    render(<AdminOptionsPage account={account(100)} refreshAccount={() => {}} />);
    await screen.findByLabelText('ModelRatio', FIELD);
    expect(screen.queryByRole('note')).toBeNull();
    for (const key of ['ModelRatio', 'GroupRatio', 'TopUpLink', 'EpayKey']) {
      expect((screen.getByLabelText(key, FIELD) as HTMLInputElement).disabled, key).toBe(false);
      expect(screen.getByRole('button', { name: `Save ${key}` }), key).toBeTruthy();
    }
    expect(screen.getByRole('button', { name: 'Clear EpayKey' })).toBeTruthy();
  });
});
