// @vitest-environment happy-dom
// A form's confirmation is about the form used last and the value it saved: "Display name saved." goes
// when the password form is used next, or when the name is edited again.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../api/types';

vi.hoisted(() => {
  vi.stubGlobal('fetch', async (r: Request) => {
    const body = await r.json() as Record<string, unknown>;
    const reply = (status: number, b: unknown) => new Response(JSON.stringify(b), { status, headers: { 'content-type': 'application/json' } });
    if (r.method === 'PUT' && 'password' in body) return reply(401, { success: false, message: 'original_password: is wrong' });
    if (r.method === 'PUT' && body.display_name === 'refused') return reply(400, { success: false, message: 'display_name: is not allowed' });
    return reply(200, { success: true, message: '', data: {} });
  });
});

import { ProfilePage } from './profile';

afterEach(cleanup);

const account = { id: 1, username: 'u', display_name: 'old', role: 1, status: 1, email: '', group: 'default', quota: 0, used_quota: 0, request_count: 0,
  aff_code: 'abc', aff_count: 0, aff_quota: 0, aff_history_quota: 0 } as unknown as Account;

describe('ProfilePage', () => {
  it('"Display name saved." goes when the password form is used, or the name edited', async () => {
    render(<ProfilePage account={account} refreshAccount={() => {}} />);
    const name = screen.getByRole('textbox', { name: 'Display name' });
    fireEvent.input(name, { target: { value: 'new' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    expect(await screen.findByText('Display name saved.')).toBeTruthy();
    fireEvent.input(name, { target: { value: 'newer' } });
    await waitFor(() => expect(screen.queryByText('Display name saved.')).toBeNull());
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    expect(await screen.findByText('Display name saved.')).toBeTruthy();
    fireEvent.input(screen.getByLabelText('Current password'), { target: { value: 'wrong-one1' } });
    fireEvent.input(screen.getByLabelText('New password'), { target: { value: 'another-1' } });
    fireEvent.input(screen.getByLabelText('New password again'), { target: { value: 'another-1' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Change password' }));
    expect(await screen.findByText('is wrong')).toBeTruthy();
    expect(screen.queryByText('Display name saved.')).toBeNull();
  });

  it('a refused display name\'s error goes when the password form is used', async () => {
    render(<ProfilePage account={account} refreshAccount={() => {}} />);
    fireEvent.input(screen.getByRole('textbox', { name: 'Display name' }), { target: { value: 'refused' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    expect(await screen.findByText('is not allowed')).toBeTruthy();
    fireEvent.input(screen.getByLabelText('Current password'), { target: { value: 'wrong-one1' } });
    fireEvent.input(screen.getByLabelText('New password'), { target: { value: 'another-1' } });
    fireEvent.input(screen.getByLabelText('New password again'), { target: { value: 'another-1' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Change password' }));
    expect(await screen.findByText('is wrong')).toBeTruthy();
    expect(screen.queryByText('is not allowed')).toBeNull();
    // And the password form's error goes in turn once the name form is used again.
    fireEvent.input(screen.getByRole('textbox', { name: 'Display name' }), { target: { value: 'fine' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    expect(await screen.findByText('Display name saved.')).toBeTruthy();
    expect(screen.queryByText('is wrong')).toBeNull();
  });
});
