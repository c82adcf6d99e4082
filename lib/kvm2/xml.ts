/**
 * XML text helpers for the libvirt documents the provider writes and reads: escaping of every
 * value written, and a namespace-aware reader (saxes, bounded) for what libvirt sends back
 * (domain XML, metadata elements). The reader is not a validating parser: it handles elements,
 * attributes, text, CDATA, comments, processing instructions and the predefined and numeric
 * entities, and refuses DTDs with an internal subset and anything malformed. Pure and synchronous.
 */
import { SaxesParser } from 'saxes';
import { Kvm2BuildError, XmlSyntaxError } from './build-errors.ts';

/**
 * What a written value may not hold: control characters other than tab and LF (C0, CR, DEL, C1;
 * XML cannot carry most of them and normalizes CR away), lone surrogates, U+FFFE and U+FFFF.
 */
const FORBIDDEN_RE =
  // eslint-disable-next-line no-control-regex
  /[\x00-\x08\x0B-\x1F\x7F-\x9F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/**
 * Escapes `& < > " '` for element text and attribute values (either quote). Refuses control
 * characters other than tab and newline with a {@link Kvm2BuildError} naming `field`.
 */
export function escapeXml(value: string, field = 'value'): string {
  const bad = FORBIDDEN_RE.exec(value);
  if (bad) {
    const code = bad[0].codePointAt(0) ?? 0;
    throw new Kvm2BuildError(
      field,
      `contains the character U+${code.toString(16).toUpperCase().padStart(4, '0')} at index ${bad.index}, which the XML written here may not carry (control characters other than tab and newline are refused)`,
    );
  }
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** Returns `value` unless it is empty or blank; throws Kvm2BuildError naming `field` otherwise. */
export function nonEmpty(value: string, field: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new Kvm2BuildError(field, 'must be a non-empty string');
  return value;
}

/** Returns `path` if it is absolute; throws Kvm2BuildError naming `field` otherwise. */
export function absolute(path: string, field: string): string {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw new Kvm2BuildError(field, `must be an absolute path, got ${JSON.stringify(path)}`);
  }
  return path;
}

/** An element as read by {@link parseXml}. */
export interface XmlElement {
  /** The qualified name as written (`ep:proxy`). */
  name: string;
  /** The local part (`proxy`). */
  localName: string;
  /** The namespace URI in scope for the prefix (or the default namespace), if any. */
  namespace: string | undefined;
  /** Attributes by qualified name, values unescaped. */
  attributes: ReadonlyMap<string, string>;
  children: XmlElement[];
  /** The element's own text (CDATA included), children's text excluded. */
  text: string;
}

/**
 * Limits of {@link parseXml}. What it reads comes from a host's libvirtd (domain metadata the
 * adoption guard checks), so anyone with libvirt access on a host controls it: the reader is
 * linear in its input, and the input is bounded. Our mark is a few hundred bytes and a whole
 * domain XML a few tens of KiB; at this size the worst shapes take tens of ms.
 */
export const XML_MAX_CHARS = 256 * 1024;
export const XML_MAX_DEPTH = 64;

/**
 * Parses one XML document and returns its root element; throws {@link XmlSyntaxError} (with the
 * offset). saxes does the reading (well-formedness, entities, namespaces) in time linear in the
 * input; this adds the bounds: at most {@link XML_MAX_CHARS} characters, {@link XML_MAX_DEPTH}
 * levels, and no DTD internal subset (no entity definitions).
 */
export function parseXml(text: string): XmlElement {
  if (text.length > XML_MAX_CHARS) throw new XmlSyntaxError(`document longer than ${XML_MAX_CHARS} characters`, 0);
  const parser = new SaxesParser({ xmlns: true, position: true });
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  const appendText = (t: string): void => {
    const top = stack.at(-1);
    if (top) top.text += t;
  };
  parser.on('doctype', (doctype) => {
    if (doctype.includes('[')) throw new XmlSyntaxError('DTD internal subsets are not accepted', parser.position);
  });
  parser.on('opentag', (tag) => {
    if (stack.length >= XML_MAX_DEPTH) {
      throw new XmlSyntaxError(`elements nested deeper than ${XML_MAX_DEPTH}`, parser.position);
    }
    const attributes = new Map<string, string>();
    for (const [name, attr] of Object.entries(tag.attributes)) attributes.set(name, attr.value);
    const el: XmlElement = {
      name: tag.name,
      localName: tag.local,
      namespace: tag.uri === '' ? undefined : tag.uri,
      attributes,
      children: [],
      text: '',
    };
    stack.at(-1)?.children.push(el);
    root ??= el;
    stack.push(el);
  });
  parser.on('closetag', () => void stack.pop());
  parser.on('text', appendText);
  parser.on('cdata', appendText);
  try {
    parser.write(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text).close();
  } catch (err) {
    if (err instanceof XmlSyntaxError) throw err;
    throw new XmlSyntaxError((err as Error).message, parser.position, { cause: err });
  }
  if (!root) throw new XmlSyntaxError('no root element', parser.position);
  return root;
}

/** Depth-first: the first element (root included) for which `match` holds. */
export function findElement(root: XmlElement, match: (el: XmlElement) => boolean): XmlElement | undefined {
  const todo = [root];
  for (let el = todo.pop(); el; el = todo.pop()) {
    if (match(el)) return el;
    for (let i = el.children.length - 1; i >= 0; i--) todo.push(el.children[i]!);
  }
  return undefined;
}
