// What an operator decides about new accounts and passwords, from the options (option-catalogue.ts):
// RegisterEnabled, PasswordRegisterEnabled, EmailVerificationEnabled, PasswordMinLength,
// PasswordRequireLetterAndDigit, QuotaForNewUser, QuotaForInviter and QuotaForInvitee. Read once per request.
import type { Db } from '../db.js';
import { ConsoleError } from '../http/errors.js';
import { loadOptionView } from '../options/option-catalogue.js';

export interface RegistrationPolicy {
  registerEnabled: boolean;
  passwordRegisterEnabled: boolean;
  emailVerificationRequired: boolean;
  passwordMinLength: number;
  passwordNeedsLetterAndDigit: boolean;
  quotaForNewUser: number;
  quotaForInviter: number;
  quotaForInvitee: number;
  affTransferMinQuota: number;
}

export async function loadRegistrationPolicy(db: Db): Promise<RegistrationPolicy> {
  const o = await loadOptionView(db);
  return {
    registerEnabled: o.get<boolean>('RegisterEnabled'),
    passwordRegisterEnabled: o.get<boolean>('PasswordRegisterEnabled'),
    emailVerificationRequired: o.get<boolean>('EmailVerificationEnabled'),
    passwordMinLength: o.get<number>('PasswordMinLength'),
    passwordNeedsLetterAndDigit: o.get<boolean>('PasswordRequireLetterAndDigit'),
    quotaForNewUser: o.get<number>('QuotaForNewUser'),
    quotaForInviter: o.get<number>('QuotaForInviter'),
    quotaForInvitee: o.get<number>('QuotaForInvitee'),
    affTransferMinQuota: o.get<number>('AffTransferMinQuota'),
  };
}

/** The password rules of the options, on top of the schema's 8 to 64 characters. */
export function assertPasswordRules(p: RegistrationPolicy, password: string, field = 'password'): void {
  if ([...password].length < p.passwordMinLength) {
    throw new ConsoleError('VALIDATION_FAILED', `${field}: must be at least ${p.passwordMinLength} characters`);
  }
  if (p.passwordNeedsLetterAndDigit && !(/\p{L}/u.test(password) && /\p{Nd}/u.test(password))) {
    throw new ConsoleError('VALIDATION_FAILED', `${field}: must contain a letter and a digit`);
  }
}
