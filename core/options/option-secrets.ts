// Secret options (console-api/options/option-catalogue.ts, `secret: true`: the payment keys, SMTPToken,
// the OIDC client secret) are stored sealed under KEY_SECRET, each bound to its own key, so that a
// dump of `options` gives none of them: an EpayKey would forge paid notices, an SMTPToken send mail as
// the operator. The console seals them when they are set; their readers open them through the
// console's Options view or loadSmtpSettings (core/email/mailer.ts). The relay never needs them: to it
// a sealed value is text it does not read.
import { createTextSealer } from '../../infra/secrets/api-key-crypto.js';

export interface OptionSealer {
  seal(key: string, plain: string): string;
  /** The plaintext of the stored value; one stored before sealing (no prefix) as it is. Throws if sealed under another KEY_SECRET. */
  open(key: string, stored: string): string;
}

export function createOptionSealer(keySecret: string): OptionSealer {
  const sealer = createTextSealer(keySecret, 'options');
  return {
    seal: (key, plain) => sealer.seal(plain, `option:${key}`),
    open(key, stored) {
      try {
        return sealer.open(stored, `option:${key}`);
      } catch {
        throw new Error(`option ${key} cannot be opened with this KEY_SECRET: set it again`);
      }
    },
  };
}
