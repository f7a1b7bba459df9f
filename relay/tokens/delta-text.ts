// The delivered text of a batch of content_block_delta payloads (JSON, one per line), in order:
//   text_delta → text, thinking_delta → thinking, input_json_delta → partial_json
// (all three are output tokens the provider bills). signature_delta (an opaque signature of the
// thinking, not model output), citations_delta and unknown deltas add nothing. A line that is not
// valid JSON is skipped.
export function deltaText(batch: Buffer): string {
  let text = '';
  let pos = 0;
  while (pos < batch.length) {
    let nl = batch.indexOf(0x0a, pos);
    if (nl < 0) nl = batch.length;
    if (nl > pos) {
      let payload: { delta?: Record<string, unknown> } | null = null;
      try {
        payload = JSON.parse(batch.toString('utf8', pos, nl)) as { delta?: Record<string, unknown> };
      } catch {
        payload = null;
      }
      const d = payload?.delta;
      if (d) {
        if (typeof d.text === 'string' && (d.type === 'text_delta' || d.type === undefined)) text += d.text;
        else if (d.type === 'thinking_delta' && typeof d.thinking === 'string') text += d.thinking;
        else if (d.type === 'input_json_delta' && typeof d.partial_json === 'string') text += d.partial_json;
      }
    }
    pos = nl + 1;
  }
  return text;
}
