// Which encoding counts a model's tokens where its provider states none (a stream cut before its
// usage, a provider that reports no usage) and for the prompt estimates. OpenAI publishes its
// tokenizers: GPT-4o and the models after it use o200k_base, GPT-4 and GPT-3.5 cl100k_base (tiktoken's
// own table of models). Anthropic's tokenizer is not public: cl100k_base is the estimate for Claude and
// for every other model, as before.
import { DEFAULT_ENCODING, type Encoding } from './bpe-count.js';

/** OpenAI's models on o200k_base, by name as tiktoken maps them (a fine-tune's `ft:` prefix included). */
const O200K_MODEL = /^(?:ft:)?(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[1-9](?:-|$))/i;

/** The encoding of the model as its provider is sent it (after the channel's model mapping). */
export function encodingOf(model: string): Encoding {
  return O200K_MODEL.test(model) ? 'o200k_base' : DEFAULT_ENCODING;
}
