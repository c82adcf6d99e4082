/**
 * XML text helpers for the libvirt documents the provider writes and reads: escaping of every
 * value written, and a small namespace-aware reader for what libvirt sends back (domain XML,
 * metadata elements). The reader is not a validating parser: it handles elements, attributes,
 * text, CDATA, comments, processing instructions and the predefined and numeric entities, and
 * refuses DTDs with an internal subset and anything malformed. Pure and synchronous.
 */
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

/** Limits of {@link parseXml}: documents from libvirt are far smaller. */
export const XML_MAX_CHARS = 4 * 1024 * 1024;
export const XML_MAX_DEPTH = 64;

const NAME = '[A-Za-z_][A-Za-z0-9._:-]*';
const START_TAG_RE = new RegExp(`<(${NAME})((?:\\s+${NAME}\\s*=\\s*(?:"[^"<]*"|'[^'<]*'))*)\\s*(/?)>`, 'y');
const ATTR_RE = new RegExp(`(${NAME})\\s*=\\s*(?:"([^"<]*)"|'([^'<]*)')`, 'g');
const END_TAG_RE = new RegExp(`</(${NAME})\\s*>`, 'y');

/** Parses one XML document and returns its root element; throws {@link XmlSyntaxError} (with the offset). */
export function parseXml(text: string): XmlElement {
  if (text.length > XML_MAX_CHARS) throw new XmlSyntaxError(`document longer than ${XML_MAX_CHARS} characters`, 0);
  const stack: { el: XmlElement; ns: Map<string, string> }[] = [];
  let root: XmlElement | undefined;
  let pos = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const skip = (open: string, close: string) => {
    const end = text.indexOf(close, pos + open.length);
    if (end < 0) throw new XmlSyntaxError(`unterminated ${open}`, pos);
    const body = text.slice(pos + open.length, end);
    pos = end + close.length;
    return body;
  };
  while (pos < text.length) {
    const lt = text.indexOf('<', pos);
    const chunk = text.slice(pos, lt < 0 ? text.length : lt);
    if (chunk !== '') {
      const top = stack.at(-1);
      if (top) top.el.text += decodeEntities(chunk, pos);
      else if (chunk.trim() !== '') throw new XmlSyntaxError('text outside the root element', pos);
    }
    if (lt < 0) break;
    pos = lt;
    if (text.startsWith('<!--', pos)) skip('<!--', '-->');
    else if (text.startsWith('<?', pos)) skip('<?', '?>');
    else if (text.startsWith('<![CDATA[', pos)) {
      const top = stack.at(-1);
      if (!top) throw new XmlSyntaxError('CDATA outside the root element', pos);
      top.el.text += skip('<![CDATA[', ']]>');
    } else if (text.startsWith('<!DOCTYPE', pos)) {
      if (skip('<!DOCTYPE', '>').includes('[')) throw new XmlSyntaxError('DTD internal subsets are not accepted', pos);
    } else if (text.startsWith('</', pos)) {
      END_TAG_RE.lastIndex = pos;
      const m = END_TAG_RE.exec(text);
      const top = stack.pop();
      if (!m || !top || top.el.name !== m[1]) throw new XmlSyntaxError('mismatched end tag', pos);
      pos = END_TAG_RE.lastIndex;
    } else {
      START_TAG_RE.lastIndex = pos;
      const m = START_TAG_RE.exec(text);
      if (!m) throw new XmlSyntaxError('malformed tag', pos);
      if (stack.length === 0 && root) throw new XmlSyntaxError('a second root element', pos);
      if (stack.length >= XML_MAX_DEPTH) throw new XmlSyntaxError(`elements nested deeper than ${XML_MAX_DEPTH}`, pos);
      const attributes = new Map<string, string>();
      for (const a of (m[2] ?? '').matchAll(ATTR_RE)) {
        if (attributes.has(a[1]!)) throw new XmlSyntaxError(`duplicate attribute ${a[1]}`, pos);
        attributes.set(a[1]!, decodeEntities(a[2] ?? a[3] ?? '', pos));
      }
      const ns = new Map(stack.at(-1)?.ns ?? []);
      for (const [k, v] of attributes) {
        if (k === 'xmlns') ns.set('', v);
        else if (k.startsWith('xmlns:')) ns.set(k.slice(6), v);
      }
      const name = m[1]!;
      const colon = name.indexOf(':');
      const prefix = colon < 0 ? '' : name.slice(0, colon);
      const el: XmlElement = {
        name,
        localName: name.slice(colon + 1),
        namespace: ns.get(prefix) || undefined,
        attributes,
        children: [],
        text: '',
      };
      if (colon >= 0 && !ns.has(prefix)) throw new XmlSyntaxError(`undeclared namespace prefix ${prefix}`, pos);
      stack.at(-1)?.el.children.push(el);
      root ??= el;
      pos = START_TAG_RE.lastIndex;
      if (m[3] !== '/') stack.push({ el, ns });
    }
  }
  if (!root || stack.length > 0) throw new XmlSyntaxError(root ? 'unclosed element' : 'no root element', pos);
  return root;
}

function decodeEntities(text: string, at: number): string {
  return text.replace(/&([^;&\s]*);?/g, (whole, ref: string) => {
    if (!whole.endsWith(';')) throw new XmlSyntaxError('"&" that does not start an entity reference', at);
    const named: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
    if (named[ref] !== undefined) return named[ref];
    const m = /^#(?:x([0-9A-Fa-f]{1,6})|([0-9]{1,7}))$/.exec(ref);
    const code = m ? parseInt(m[1] ?? m[2] ?? '', m[1] ? 16 : 10) : NaN;
    if (!(code > 0 && code <= 0x10ffff)) throw new XmlSyntaxError(`unknown entity &${ref};`, at);
    return String.fromCodePoint(code);
  });
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
