import { describe, expect, it } from 'vitest';
import { parseNoticeSetting, publicSettingText, warningThreshold } from './notice-setting.js';

describe('notice setting', () => {
  it('reads what the console wrote and tolerates anything else', () => {
    const s = parseNoticeSetting(JSON.stringify({ notify_type: 'webhook', quota_warning_threshold: 500, webhook_url: 'https://x/', webhook_secret: 's', other: 1 }));
    expect(warningThreshold(s)).toBe(500);
    for (const text of ['', 'not json', '[]', '{"notify_type":"sms","quota_warning_threshold":5}', '{"quota_warning_threshold":-1}', 'null']) {
      expect(warningThreshold(parseNoticeSetting(text))).toBeUndefined();
    }
    expect(warningThreshold(parseNoticeSetting('{"notify_type":"email","quota_warning_threshold":0}'))).toBeUndefined();
    expect(warningThreshold(parseNoticeSetting('{"quota_warning_threshold":100}'))).toBeUndefined();
  });

  it('never shows the webhook secret, and says whether one is kept', () => {
    const shown = JSON.parse(publicSettingText(JSON.stringify({ notify_type: 'webhook', webhook_secret: 'top-secret-value' })));
    expect(shown).toEqual({ notify_type: 'webhook', webhook_secret: '', webhook_secret_set: true });
    expect(publicSettingText('')).toBe('');
    expect(publicSettingText('{"notify_type":"email"}')).toBe('{"notify_type":"email"}');
    expect(publicSettingText('free text')).toBe('free text');
    // The URL whole to its owner; to anyone else its scheme and host.
    const hooked = JSON.stringify({ notify_type: 'webhook', webhook_url: 'https://hooks.example.com/services/T0/B0/tok?x=1' });
    expect(JSON.parse(publicSettingText(hooked, true)).webhook_url).toBe('https://hooks.example.com/services/T0/B0/tok?x=1');
    expect(JSON.parse(publicSettingText(hooked)).webhook_url).toBe('https://hooks.example.com/…');
    expect(JSON.parse(publicSettingText(JSON.stringify({ webhook_url: 'https://hooks.example.com' }))).webhook_url).toBe('https://hooks.example.com/');
    expect(JSON.parse(publicSettingText(JSON.stringify({ webhook_url: 'not a url' }))).webhook_url).toBe('…');
  });
});
