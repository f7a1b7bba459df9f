// Secret options (console-api/options/option-catalogue.ts, `secret: true`: the payment keys, SMTPToken,
// the OIDC client secret) are stored sealed under KEY_SECRET, each bound to its own key, so that a
// dump of `options` gives none of them: an EpayKey would forge paid notices, an SMTPToken send mail as
// the operator. The console seals them when they are set; their readers open them through the
// console's Options view or loadSmtpSettings (core/email/mailer.ts). The relay never needs them: to it
// a sealed value is text it does not read.
import { createScopedTextSealer, type ScopedTextSealer } from '../../infra/secrets/api-key-crypto.js';

/** Keyed by option key. open names the option when it fails (sealed under another KEY_SECRET): that one must be set again. */
export type OptionSealer = ScopedTextSealer<string>;

export function createOptionSealer(keySecret: string): OptionSealer {
  const sealer = createScopedTextSealer(keySecret, 'options', (key: string) => `option:${key}`);
  return {
    seal: sealer.seal,
    open(key, stored) {
      try {
        return sealer.open(key, stored);
      } catch {
        throw new Error(`option ${key} cannot be opened with this KEY_SECRET: set it again`);
      }
    },
  };
}
