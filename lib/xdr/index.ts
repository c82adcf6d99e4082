/**
 * The XDR vocabulary of the project: @stellar/js-xdr's typed schemas plus the few shapes libvirt
 * needs that it lacks (UTF-8 strings as JS strings). Every length read from the wire is checked
 * against its bound before anything is allocated (js-xdr checks lengths against both the declared
 * maximum and the bytes remaining).
 */
import { BaseType, string as xdrBytesString, XdrError } from '@stellar/js-xdr';
import type { Reader, Writer, XdrType } from '@stellar/js-xdr';

export {
  array,
  bool,
  fixedArray,
  int32,
  int64,
  opaque,
  option,
  struct,
  uint32,
  uint64,
  varOpaque,
  void as voidType,
  XdrError,
} from '@stellar/js-xdr';
export type { Infer, XdrType } from '@stellar/js-xdr';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });

/** An XDR `string<max>` presented as a JS string (UTF-8 on the wire). */
class Utf8StringType extends BaseType<string> implements XdrType<string> {
  readonly kind = 'string';
  readonly maxLength: number;
  readonly #bytes: XdrType<Uint8Array>;
  constructor(maxLength: number) {
    super();
    this.maxLength = maxLength;
    this.#bytes = xdrBytesString(maxLength);
  }
  _read(reader: Reader, path: string): string {
    return decoder.decode(this.#bytes._read(reader, path));
  }
  _write(value: string, writer: Writer, path: string): void {
    if (typeof value !== 'string') throw new XdrError(`${path}: expected string`);
    this.#bytes._write(encoder.encode(value), writer, path);
  }
}

/** `string<maxLength>` as a JS string. */
export function utf8String(maxLength: number): XdrType<string> {
  return new Utf8StringType(maxLength);
}
