// The API key of a request, from its headers alone: where it is sent, and whether it is worth a
// lookup. Shared by every /v1/ route, so that a request without a key of our shape is refused before
// any body byte is kept, any hash computed or any query made.
import type { HttpRequest } from 'uWebSockets.js';
import { hasApiKeyShape } from '../../infra/secrets/api-key-crypto.js';
import { RelayError } from '../errors.js';

/** Answered to every request without a key, and to every key we could not have issued or do not know. */
export const MISSING_KEY_ERROR = new RelayError('missing_api_key');
export const UNKNOWN_KEY_ERROR = new RelayError('invalid_api_key');

export function extractApiKey(req: HttpRequest): string {
  const direct = req.getHeader('x-api-key');
  if (direct) return direct;
  const auth = req.getHeader('authorization');
  return auth.length > 7 && auth.slice(0, 7).toLowerCase() === 'bearer ' ? auth.slice(7).trim() : '';
}

/** The 401 for a key that is missing or not of the shape generateApiKey gives; null when it may be looked up. */
export function keyShapeError(apiKey: string): RelayError | null {
  if (!apiKey) return MISSING_KEY_ERROR;
  return hasApiKeyShape(apiKey) ? null : UNKNOWN_KEY_ERROR;
}
