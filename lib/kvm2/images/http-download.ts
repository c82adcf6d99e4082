/**
 * The HTTP source of a base image: one GET on a dispatcher of its own (so its timeouts and its
 * socket belong to this download alone), with a connect bound, a headers bound, a body idle bound
 * and an overall deadline. The body is exposed as a stream that counts the bytes against
 * Content-Length and computes their sha256 while they pass; every failure of the body surfaces on
 * that stream as a project error (ImageDownloadError, ImageTruncatedError, ImageAbortedError).
 * `close()` destroys the body and the dispatcher on every path.
 */
import { createHash } from 'node:crypto';
import { Transform } from 'node:stream';
import type { Readable, TransformCallback } from 'node:stream';
import { Agent, interceptors, request } from 'undici';
import type { Dispatcher } from 'undici';
import { ProjectError } from '../../errors.ts';
import { isHttpUrl } from '../../rules.ts';
import { ImageAbortedError, ImageDownloadError, ImageSpecError, ImageTruncatedError } from '../errors.ts';

export interface HttpDownloadOptions {
  /** Bound on the TCP (and TLS) connect, in ms. */
  connectTimeoutMs: number;
  /** Longest wait for the response headers once the request is sent, in ms. */
  headersTimeoutMs: number;
  /**
   * Longest pause between two pieces of the body, in ms. Time spent paused because the consumer
   * applies backpressure does not count (undici stops this timer while the socket is paused).
   */
  bodyIdleTimeoutMs: number;
  /** Deadline of the whole download (headers and body), in ms from the call. */
  totalTimeoutMs: number;
  /** Ends the download when it fires (the error is ImageAbortedError). */
  signal?: AbortSignal;
  /** Redirects followed. Default 5. */
  maxRedirections?: number;
}

/** Number of leading body bytes kept for a format check (`head`). */
export const HEAD_BYTES = 16;

/** An open download: the response headers were accepted and the body is ready to be read. */
export interface HttpDownload {
  readonly url: string;
  /** The announced Content-Length: the body yields exactly this many bytes or fails. */
  readonly contentLengthBytes: number;
  /** The body, counted and hashed. Errors are project errors. Read it once. */
  readonly body: Readable;
  /**
   * Aborts when the caller's signal fires or the overall deadline passes; its `reason` is the
   * project error to report. Pass it to whatever consumes the body.
   */
  readonly signal: AbortSignal;
  /** Bytes that went through `body` so far. */
  readonly bytesReceived: number;
  /** Whether the body ended with exactly `contentLengthBytes` bytes. */
  readonly complete: boolean;
  /** The sha256 (lowercase hex) of the body; throws unless `complete`. */
  readonly sha256: string;
  /** The first HEAD_BYTES bytes of the body (fewer for a shorter body). */
  readonly head: Buffer;
  /** The error that ended the download through `signal`, if it fired. */
  abortReason(): ProjectError | undefined;
  /** Destroys the body and the dispatcher and clears the deadline. Idempotent; never throws. */
  close(): Promise<void>;
}

/** Status codes that may succeed on a retry; other 4xx (and unexpected statuses) are Permanent. */
const TRANSIENT_STATUS = new Set([408, 425, 429]);

function checkUrl(url: string): void {
  if (!isHttpUrl(url)) throw new ImageSpecError('url', `must be an http or https URL, got ${JSON.stringify(url)}`);
}

/** Maps a failure of undici (request or body) to a project error. */
function mapUndiciError(url: string, err: unknown, options: HttpDownloadOptions, received?: number): ProjectError {
  if (err instanceof ProjectError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const detail = err instanceof Error ? err.message : String(err);
  const at = received === undefined ? '' : ` after ${received} bytes`;
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new ImageDownloadError(url, `${url}: connect timed out (${options.connectTimeoutMs} ms)`, { cause: err });
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new ImageDownloadError(url, `${url}: no response headers within ${options.headersTimeoutMs} ms`, {
        cause: err,
      });
    case 'UND_ERR_BODY_TIMEOUT':
      return new ImageDownloadError(
        url,
        `${url}: the body stalled${at} (no data for ${options.bodyIdleTimeoutMs} ms)`,
        {
          cause: err,
        },
      );
    case 'UND_ERR_INVALID_ARG':
      return new ImageDownloadError(url, `${url}: request refused by the HTTP client: ${detail}`, {
        cause: err,
        kind: 'Permanent',
      });
    default:
      return new ImageDownloadError(url, `${url}: download failed${at}: ${detail}`, { cause: err });
  }
}

/**
 * Sends the GET and checks the response: status 200 and a Content-Length are required. Resolves
 * once the headers are accepted; the caller must read `body` and call `close()` in any case.
 */
export async function openHttpDownload(url: string, options: HttpDownloadOptions): Promise<HttpDownload> {
  checkUrl(url);
  const controller = new AbortController();
  // A clearable timer rather than AbortSignal.timeout(): the deadline is released with the download.
  const deadline = setTimeout(
    () =>
      controller.abort(
        new ImageDownloadError(url, `${url}: the download did not finish within ${options.totalTimeoutMs} ms`),
      ),
    options.totalTimeoutMs,
  );
  const onCallerAbort = (): void =>
    controller.abort(
      new ImageAbortedError(`${url}: download aborted by the caller`, { cause: options.signal?.reason }),
    );
  if (options.signal?.aborted === true) onCallerAbort();
  else options.signal?.addEventListener('abort', onCallerAbort, { once: true });

  const agent = new Agent({
    connect: { timeout: options.connectTimeoutMs },
    headersTimeout: options.headersTimeoutMs,
    bodyTimeout: options.bodyIdleTimeoutMs,
    connections: 1,
  });
  const dispatcher: Dispatcher = agent.compose(
    interceptors.redirect({ maxRedirections: options.maxRedirections ?? 5 }),
  );
  let closed = false;
  let source: Readable | undefined;
  let verifier: Verifier | undefined;

  const abortReason = (): ProjectError | undefined =>
    controller.signal.aborted ? (controller.signal.reason as ProjectError) : undefined;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    clearTimeout(deadline);
    options.signal?.removeEventListener('abort', onCallerAbort);
    verifier?.destroy();
    source?.destroy();
    try {
      await agent.destroy();
    } catch {
      // already destroyed
    }
  };

  try {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        dispatcher,
        method: 'GET',
        headers: { 'accept-encoding': 'identity' },
        signal: controller.signal,
      });
    } catch (err) {
      throw abortReason() ?? mapUndiciError(url, err, options);
    }
    source = res.body;
    // Errors of the body are reported through the verifier (or not at all once closed): never as
    // an unhandled 'error' event, which a destroy() in close() would otherwise raise.
    res.body.on('error', () => {});
    if (res.statusCode !== 200) {
      const kind = res.statusCode >= 500 || TRANSIENT_STATUS.has(res.statusCode) ? 'Transient' : 'Permanent';
      throw new ImageDownloadError(url, `${url}: the server answered HTTP ${res.statusCode}`, {
        kind,
        statusCode: res.statusCode,
      });
    }
    const header = res.headers['content-length'];
    const lengthText = Array.isArray(header) ? header[0] : header;
    if (lengthText === undefined || !/^\d{1,15}$/.test(lengthText.trim())) {
      throw new ImageDownloadError(
        url,
        `${url}: the response has no valid Content-Length (got ${JSON.stringify(lengthText ?? null)}); ` +
          'the image size must be known before the upload: serve the file with a Content-Length header',
        { kind: 'Permanent', statusCode: res.statusCode },
      );
    }
    const contentLengthBytes = Number(lengthText.trim());
    if (contentLengthBytes === 0) {
      throw new ImageDownloadError(url, `${url}: the image is empty (Content-Length: 0)`, {
        kind: 'Permanent',
        statusCode: res.statusCode,
      });
    }
    const v = new Verifier(url, contentLengthBytes);
    verifier = v;
    // The consumer sees the verifier's errors through its own read (pipe, async iteration); until
    // it starts reading (during the capacity check, say), an error must not be unhandled.
    v.on('error', () => {});
    const body = res.body;
    body.on('error', (err) => v.destroy(abortReason() ?? mapUndiciError(url, err, options, v.bytes)));
    v.on('close', () => body.destroy());
    body.pipe(v);
    return {
      url,
      contentLengthBytes,
      body: v,
      signal: controller.signal,
      get bytesReceived() {
        return v.bytes;
      },
      get complete() {
        return v.digest !== undefined;
      },
      get sha256() {
        if (v.digest === undefined) throw new Error(`${url}: the body has not been read completely`);
        return v.digest;
      },
      get head() {
        return Buffer.from(v.head);
      },
      abortReason,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Passes the body through, counting it against Content-Length and hashing it. */
class Verifier extends Transform {
  readonly #url: string;
  readonly #expected: number;
  readonly #hash = createHash('sha256');
  bytes = 0;
  head: Buffer = Buffer.alloc(0);
  digest: string | undefined;

  constructor(url: string, expectedBytes: number) {
    super();
    this.#url = url;
    this.#expected = expectedBytes;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.#expected) {
      callback(new ImageTruncatedError(this.#url, this.#expected, this.bytes));
      return;
    }
    if (this.head.length < HEAD_BYTES) {
      this.head = Buffer.concat([this.head, chunk.subarray(0, HEAD_BYTES - this.head.length)]);
    }
    this.#hash.update(chunk);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.bytes !== this.#expected) {
      callback(new ImageTruncatedError(this.#url, this.#expected, this.bytes));
      return;
    }
    this.digest = this.#hash.digest('hex');
    callback();
  }
}
