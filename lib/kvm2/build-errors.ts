/**
 * Errors of the provider's pure builders and readers (seed image, cloud-config, domain and volume
 * XML): a value that cannot be put into the generated text safely, or XML that cannot be read.
 * Class names are stable: Temporal matches retry policies on them.
 */
import { ProjectError } from '../errors.ts';
import type { ErrorKind, ProjectErrorOptions } from '../errors.ts';

/**
 * A builder input is invalid (a hostname that is not an RFC 1123 label, a control character in an
 * XML value, a file name an ISO image cannot hold, ...). Permanent: the same input fails the same
 * way. `field` names the input, e.g. `metadata.proxyName` or `files[1].name`.
 */
export class Kvm2BuildError extends ProjectError {
  readonly kind: ErrorKind = 'Permanent';
  readonly code = 'KVM2_BUILD_INPUT';
  readonly field: string;
  constructor(field: string, problem: string, options?: ProjectErrorOptions) {
    super(`${field} ${problem}`, options);
    this.field = field;
  }
}

/**
 * XML read back from libvirt is malformed or beyond the reader's limits (see `parseXml` in
 * xml.ts). Permanent: the same document fails the same way. The message gives the offset.
 */
export class XmlSyntaxError extends ProjectError {
  readonly kind: ErrorKind = 'Permanent';
  readonly code = 'KVM2_XML_SYNTAX';
  readonly offset: number;
  constructor(problem: string, offset: number, options?: ProjectErrorOptions) {
    super(`malformed XML: ${problem} at offset ${offset}`, options);
    this.offset = offset;
  }
}
