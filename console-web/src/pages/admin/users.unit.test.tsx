// @vitest-environment happy-dom
// The account edit form renames an account and resets its password: the name is sent only when
// changed, the password only when typed; the API's refusals show in the form, next to their field
// when they name one. The own account has no reset here (the API refuses it).
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../../api/types';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s: { handle?: (r: Request) => Promise<Response> } = {};
  vi.stubGlobal('fetch', (r: Request) => (s.handle ? s.handle(r) : Promise.reject(new Error('no fetch here'))));
  return s;
});

import { AdminUsersPage, EditAccount } from './users';

afterEach(cleanup);

const ANN = { id: 7, username: 'ann', display_name: 'Ann', role: 1, status: 1, group: 'default', quota: 500_000, used_quota: 0, request_count: 0 } as unknown as Account;

function reply(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

describe('EditAccount', () => {
  it('sends nothing about the name or the password until they are changed', async () => {
    const bodies: unknown[] = [];
    server.handle = async (r) => { bodies.push(await r.json()); return reply(200, { success: true, message: '', data: ANN }); };
    const onDone = vi.fn();
    render(<EditAccount a={ANN} self={false} groups={['default']} onDone={onDone} />);
    expect((screen.getByLabelText('Username') as HTMLInputElement).value).toBe('ann');
    const password = screen.getByLabelText('New password') as HTMLInputElement;
    expect(password.value).toBe('');
    expect(password.type).toBe('password');
    expect(password.getAttribute('autocomplete')).toBe('new-password');
    expect(screen.getByText(/signs the account out everywhere/)).toBeTruthy();
    fireEvent.input(screen.getByLabelText('Display name'), { target: { value: 'Annie' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies).toEqual([{ id: 7, display_name: 'Annie' }]);
  });

  it('refuses a balance or an addition below the smallest unit next to its field, and stays open', async () => {
    const bodies: unknown[] = [];
    server.handle = async (r) => { bodies.push(await r.json()); return reply(200, { success: true, message: '', data: ANN }); };
    const onDone = vi.fn();
    render(<EditAccount a={ANN} self={false} groups={['default']} onDone={onDone} />);
    const balance = screen.getByLabelText('Balance (US dollars)');
    fireEvent.input(balance, { target: { value: '0.0000001' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await screen.findByText(/^below \$0\.000002 \(1 quota\), the smallest amount/);
    expect(balance.getAttribute('aria-invalid')).toBe('true');
    const add = screen.getByLabelText('Add to balance (US dollars)');
    fireEvent.input(add, { target: { value: '-0.0000001' } });
    fireEvent.click(screen.getByRole('button', { name: 'Add quota' }));
    await waitFor(() => expect(add.getAttribute('aria-invalid')).toBe('true'));
    expect(screen.getAllByText(/^below \$0\.000002/)).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 20));
    expect(bodies).toEqual([]);
    expect(onDone).not.toHaveBeenCalled();
    // $0 itself is a balance an administrator may set.
    fireEvent.input(balance, { target: { value: '0' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies).toEqual([{ id: 7, quota: 0, expected_quota: 500_000 }]);
  });

  it('renames and resets the password', async () => {
    const bodies: unknown[] = [];
    server.handle = async (r) => { bodies.push(await r.json()); return reply(200, { success: true, message: '', data: ANN }); };
    const onDone = vi.fn();
    render(<EditAccount a={ANN} self={false} groups={['default']} onDone={onDone} />);
    fireEvent.input(screen.getByLabelText('Username'), { target: { value: 'anna' } });
    fireEvent.input(screen.getByLabelText('New password'), { target: { value: 'fresh-pass-1' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies).toEqual([{ id: 7, username: 'anna', password: 'fresh-pass-1' }]);
  });

  it('shows a taken name under Username, and a refused password next to its field until it is edited', async () => {
    server.handle = async () => reply(409, { success: false, message: 'username is already taken' });
    const onDone = vi.fn();
    render(<EditAccount a={ANN} self={false} groups={['default']} onDone={onDone} />);
    const username = screen.getByLabelText('Username');
    fireEvent.input(username, { target: { value: 'bob' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    // USERNAME_TAKEN (409) names its field in words: it goes under Username, not to the form's foot.
    const taken = await screen.findByText('is already taken');
    expect(username.getAttribute('aria-invalid')).toBe('true');
    expect(username.getAttribute('aria-describedby')).toBe(taken.id);
    expect(screen.queryByText('username is already taken')).toBeNull();

    server.handle = async () => reply(400, { success: false, message: 'password: must be at least 12 characters' });
    const password = screen.getByLabelText('New password');
    fireEvent.input(password, { target: { value: 'short-1' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await screen.findByText('must be at least 12 characters');
    expect(password.getAttribute('aria-invalid')).toBe('true');
    expect(screen.queryByText('is already taken')).toBeNull();
    fireEvent.input(password, { target: { value: 'a-longer-pass-1' } });
    await waitFor(() => expect(password.getAttribute('aria-invalid')).toBeNull());
    expect(onDone).not.toHaveBeenCalled();
  });

  it('offers no password reset for the own account', () => {
    render(<EditAccount a={ANN} self groups={['default']} onDone={() => {}} />);
    expect(screen.queryByLabelText('New password')).toBeNull();
    expect(screen.getByText(/changed on the Profile page/)).toBeTruthy();
    expect((screen.getByLabelText('Username') as HTMLInputElement).value).toBe('ann');
  });
});

describe('AdminUsersPage', () => {
  it('bans only once the ban is confirmed, as Delete asks first', async () => {
    const posts: unknown[] = [];
    server.handle = async (r) => {
      const path = new URL(r.url).pathname;
      if (r.method === 'POST' && path === '/api/user/manage') { posts.push(await r.json()); return reply(200, { success: true, message: '', data: null }); }
      if (path === '/api/user/search') return reply(200, { success: true, message: '', data: { items: [ANN], total: 1, page: 1, page_size: 20 } });
      return reply(200, { success: true, message: '', data: [] });
    };
    const me = { ...ANN, id: 1, username: 'root', role: 100 } as Account;
    render(<AdminUsersPage account={me} refreshAccount={() => {}} />);
    fireEvent.click(await screen.findByRole('button', { name: 'Ban ann' }));
    const confirm = await screen.findByRole('button', { name: 'Confirm banning ann' });
    await waitFor(() => expect(document.activeElement).toBe(confirm));
    expect(posts).toEqual([]);
    fireEvent.click(confirm);
    await waitFor(() => expect(posts).toEqual([{ id: 7, action: 'disable' }]));
  });

  it('root\'s "Make administrator" and "Make ordinary user" act only once confirmed, as Ban and Delete do', async () => {
    const posts: unknown[] = [];
    const BEA = { ...ANN, id: 8, username: 'bea', role: 10 } as Account;
    server.handle = async (r) => {
      const path = new URL(r.url).pathname;
      if (r.method === 'POST' && path === '/api/user/manage') { posts.push(await r.json()); return reply(200, { success: true, message: '', data: null }); }
      if (path === '/api/user/search') return reply(200, { success: true, message: '', data: { items: [ANN, BEA], total: 2, page: 1, page_size: 20 } });
      return reply(200, { success: true, message: '', data: [] });
    };
    const me = { ...ANN, id: 1, username: 'root', role: 100 } as Account;
    render(<AdminUsersPage account={me} refreshAccount={() => {}} />);

    fireEvent.click(await screen.findByRole('button', { name: 'Make ann an administrator' }));
    await new Promise((r) => setTimeout(r, 20));
    expect(posts).toEqual([]);
    const promote = await screen.findByRole('button', { name: 'Confirm making ann an administrator' });
    await waitFor(() => expect(document.activeElement).toBe(promote));
    // Keep goes back without a change.
    fireEvent.click(screen.getByRole('button', { name: 'Keep' }));
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Make ann an administrator' })));
    expect(posts).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Make ann an administrator' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Confirm making ann an administrator' }));
    await waitFor(() => expect(posts).toEqual([{ id: 7, action: 'promote' }]));

    fireEvent.click(screen.getByRole('button', { name: 'Make bea an ordinary user' }));
    await new Promise((r) => setTimeout(r, 20));
    expect(posts).toEqual([{ id: 7, action: 'promote' }]);
    fireEvent.click(await screen.findByRole('button', { name: 'Confirm making bea an ordinary user' }));
    await waitFor(() => expect(posts).toEqual([{ id: 7, action: 'promote' }, { id: 8, action: 'demote' }]));
  });
});

describe('AdminUsersPage: New account', () => {
  const CAL = { ...ANN, id: 9, username: 'cal', display_name: 'cal' } as Account;
  const stack = (posts: unknown[], answer: () => Response) => async (r: Request) => {
    const path = new URL(r.url).pathname;
    if (r.method === 'POST' && path === '/api/user/') { posts.push(await r.json()); return answer(); }
    if (path === '/api/user/search') return reply(200, { success: true, message: '', data: { items: [ANN], total: 1, page: 1, page_size: 20 } });
    return reply(200, { success: true, message: '', data: [{ key: 'GroupRatio', value: '{"default":1,"vip":1.5}' }] });
  };

  it('an administrator creates an ordinary account (no role to choose) and is told its name and id', async () => {
    const posts: unknown[] = [];
    server.handle = stack(posts, () => reply(200, { success: true, message: '', data: CAL }));
    const me = { ...ANN, id: 2, username: 'adm', role: 10 } as Account;
    render(<AdminUsersPage account={me} refreshAccount={() => {}} />);
    fireEvent.click(await screen.findByRole('button', { name: 'New account' }));
    const username = await screen.findByLabelText('Username');
    await waitFor(() => expect(document.activeElement).toBe(username));
    expect(screen.queryByLabelText('Role')).toBeNull();
    fireEvent.input(username, { target: { value: 'cal' } });
    fireEvent.input(screen.getByLabelText('Password'), { target: { value: 'cal-pass-123' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create account' }));
    await screen.findByText('Created account cal (id 9). Its balance is $0: add to it with Edit.');
    expect(posts).toEqual([{ username: 'cal', password: 'cal-pass-123', group: 'default' }]);
    expect(screen.queryByRole('form', { name: 'New account' })).toBeNull();
  });

  it('root may make an administrator; a refusal naming a field shows under it and the form stays', async () => {
    const posts: unknown[] = [];
    let answer = () => reply(409, { success: false, message: 'username is already taken' });
    server.handle = stack(posts, () => answer());
    const me = { ...ANN, id: 1, username: 'root', role: 100 } as Account;
    render(<AdminUsersPage account={me} refreshAccount={() => {}} />);
    fireEvent.click(await screen.findByRole('button', { name: 'New account' }));
    const username = await screen.findByLabelText('Username');
    fireEvent.input(username, { target: { value: 'ann' } });
    fireEvent.input(screen.getByLabelText('Password'), { target: { value: 'ann-pass-123' } });
    fireEvent.input(screen.getByLabelText('Display name'), { target: { value: 'Ann B' } });
    fireEvent.input(screen.getByLabelText('Group'), { target: { value: 'vip' } });
    fireEvent.change(screen.getByLabelText('Role'), { target: { value: '10' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create account' }));
    const taken = await screen.findByText('is already taken');
    expect(username.getAttribute('aria-describedby')).toBe(taken.id);
    expect(posts).toEqual([{ username: 'ann', password: 'ann-pass-123', group: 'vip', display_name: 'Ann B', role: 10 }]);
    answer = () => reply(200, { success: true, message: '', data: { ...CAL, username: 'ann2', id: 10 } });
    fireEvent.input(username, { target: { value: 'ann2' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create account' }));
    await screen.findByText(/^Created account ann2 \(id 10\)/);
  });
});

// Review web: a refused search left the previous rows listed under its error; an administrator who
// renamed itself kept its old name in the header until a reload.
describe('AdminUsersPage: searches and the own account', () => {
  const ME = { ...ANN, id: 2, username: 'adm', display_name: 'Adm', role: 10 } as Account;
  const handler = (puts: unknown[]) => async (r: Request) => {
    const url = new URL(r.url);
    if (url.pathname === '/api/user/search') {
      if ((url.searchParams.get('keyword') ?? '').length > 100) return reply(400, { success: false, message: 'keyword: must be at most 100 characters' });
      return reply(200, { success: true, message: '', data: { items: [ANN, ME], total: 2, page: 1, page_size: 20 } });
    }
    if (r.method === 'PUT' && url.pathname === '/api/user/') { puts.push(await r.json()); return reply(200, { success: true, message: '', data: { ...ME, display_name: 'Renamed' } }); }
    return reply(200, { success: true, message: '', data: [{ key: 'GroupRatio', value: '{"default":1}' }] });
  };

  it('a refused search lists no rows under its error', async () => {
    server.handle = handler([]);
    render(<AdminUsersPage account={ME} refreshAccount={() => {}} />);
    await screen.findByRole('button', { name: 'Edit ann' });
    fireEvent.input(screen.getByLabelText('Id, username, display name or e-mail'), { target: { value: 'x'.repeat(101) } });
    fireEvent.click(screen.getByRole('button', { name: 'Search' }));
    await screen.findByText(/must be at most 100 characters/);
    expect(screen.queryByRole('button', { name: 'Edit ann' })).toBeNull();
  });

  it('saving the own account reads the signed-in account again; another account\'s does not', async () => {
    const puts: unknown[] = [];
    server.handle = handler(puts);
    const refreshAccount = vi.fn();
    render(<AdminUsersPage account={ME} refreshAccount={refreshAccount} />);
    fireEvent.click(await screen.findByRole('button', { name: 'Edit ann' }));
    fireEvent.input(await screen.findByLabelText('Display name'), { target: { value: 'Ann B.' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await waitFor(() => expect(puts).toHaveLength(1));
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Save account' })).toBeNull());
    expect(refreshAccount).not.toHaveBeenCalled();
    fireEvent.click(await screen.findByRole('button', { name: 'Edit adm' }));
    fireEvent.input(await screen.findByLabelText('Display name'), { target: { value: 'Renamed' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save account' }));
    await waitFor(() => expect(refreshAccount).toHaveBeenCalledTimes(1));
  });
});
