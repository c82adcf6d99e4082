// Page tokens of GET /v1/proxies: the server's opaque visibility token, bound to the list query
// and signed (HMAC-SHA256), so a token that was altered, made up, or used with other filters is a
// 400 here, before Temporal sees it (a visibility store may answer garbage tokens with a retried
// internal error). The key is random per process unless EP_API_PAGE_TOKEN_SECRET sets it (set the
// same secret on every replica behind one address).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const MAC_BYTES = 16;

export class PageTokens {
  readonly #key: Buffer;

  constructor(secret?: string) {
    this.#key = secret === undefined || secret === '' ? randomBytes(32) : Buffer.from(secret, 'utf8');
  }

  #mac(query: string, token: Uint8Array): Buffer {
    return createHmac('sha256', this.#key).update(query).update('\0').update(token).digest().subarray(0, MAC_BYTES);
  }

  /** The API's token for the server's `token` of `query`. */
  encode(query: string, token: Uint8Array): string {
    return Buffer.concat([this.#mac(query, token), token]).toString('base64url');
  }

  /** The server's token, or undefined when `text` was not issued by this key for `query`. */
  decode(query: string, text: string): Uint8Array | undefined {
    const raw = Buffer.from(text, 'base64url');
    if (raw.length <= MAC_BYTES || raw.toString('base64url') !== text) return undefined;
    const token = raw.subarray(MAC_BYTES);
    return timingSafeEqual(raw.subarray(0, MAC_BYTES), this.#mac(query, token)) ? token : undefined;
  }
}
