// @vitest-environment happy-dom
// Registration asks for the password twice: a typo in it would lock the new account out. A mismatch is
// named under the repeat field (as Profile's password change does) and nothing is sent.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';

const sent = vi.hoisted(() => {
  const paths: string[] = [];
  vi.stubGlobal('fetch', async (r: Request) => {
    // The page reads the public status (registration open, e-mail code needed) as it opens: not a submission.
    if (new URL(r.url).pathname !== '/api/status') paths.push(new URL(r.url).pathname);
    return new Response(JSON.stringify({ success: true, message: '', data: {} }), { status: 200, headers: { 'content-type': 'application/json' } });
  });
  return paths;
});

import { AuthPage } from './auth';

afterEach(() => { cleanup(); sent.length = 0; });

const type = (label: string, value: string) => fireEvent.input(screen.getByLabelText(label), { target: { value } });

describe('AuthPage register', () => {
  it('has a repeat field labelled and filled in as a new password', () => {
    render(<AuthPage mode="register" onLoggedIn={() => {}} />);
    const repeat = screen.getByLabelText('Repeat password') as HTMLInputElement;
    expect(repeat.type).toBe('password');
    expect(repeat.getAttribute('autocomplete')).toBe('new-password');
    expect(repeat.required).toBe(true);
  });

  it('names a mismatch under the repeat field and sends nothing; a matching repeat registers', async () => {
    const onLoggedIn = vi.fn();
    render(<AuthPage mode="register" onLoggedIn={onLoggedIn} />);
    type('Username', 'ada');
    type('Password', 'secret-password1');
    type('Repeat password', 'secret-pasword1');
    fireEvent.submit(screen.getByRole('form', { name: 'Register' }));
    const repeat = screen.getByLabelText('Repeat password');
    expect(repeat.getAttribute('aria-invalid')).toBe('true');
    const error = document.getElementById(repeat.getAttribute('aria-describedby')!)!;
    expect(error.textContent).toBe('the two passwords differ');
    expect(error.getAttribute('role')).toBe('alert');
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toEqual([]);

    type('Repeat password', 'secret-password1');
    expect(repeat.getAttribute('aria-invalid')).toBeNull();
    fireEvent.submit(screen.getByRole('form', { name: 'Register' }));
    await waitFor(() => expect(onLoggedIn).toHaveBeenCalled());
    expect(sent).toEqual(['/api/user/register', '/api/user/login']);
  });

  it('an empty repeat is named once Register is pressed', async () => {
    render(<AuthPage mode="register" onLoggedIn={() => {}} />);
    type('Username', 'ada');
    type('Password', 'secret-password1');
    expect(screen.getByLabelText('Repeat password').getAttribute('aria-invalid')).toBeNull();
    fireEvent.submit(screen.getByRole('form', { name: 'Register' }));
    expect(screen.getByText('type the password again')).toBeTruthy();
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toEqual([]);
  });

  it('the login form has no repeat field', () => {
    render(<AuthPage mode="login" onLoggedIn={() => {}} />);
    expect(screen.queryByLabelText('Repeat password')).toBeNull();
  });
});
