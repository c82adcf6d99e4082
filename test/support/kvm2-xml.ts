/**
 * What the domain and volume XML tests share: the builders under test (the unit test reads their
 * output with libxml2 and libvirt's RelaxNG schemas, test/integration/kvm2-domain-xml-virsh.test.ts
 * feeds it to a real libvirtd) and libxml2's reading of a document (`xmllint --xpath`).
 */
import { execFile } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';

export {
  OWNER_METADATA_PREFIX,
  OWNER_METADATA_URI,
  buildDomainXml,
  buildOwnerMetadataElement,
  parseOwnerMetadata,
} from '../../lib/kvm2/proxy/domain-xml.ts';
export type { DomainSpec, OwnerMetadata } from '../../lib/kvm2/proxy/domain-xml.ts';
export { buildVolumeXml } from '../../lib/kvm2/volume-xml.ts';

const pexec = promisify(execFile);

/** `xmllint --xpath expr` over the document in the file `path`: libxml2 parses, not our code. */
export async function xpath(path: string, expr: string): Promise<string> {
  const { stdout } = await pexec('xmllint', ['--xpath', expr, path], { timeout: 10_000 });
  return stdout.replace(/\n$/, '');
}

/** libxml2's reading of `xml` at `expr`; the document goes through the file `scratchPath`, removed after. */
export async function xpathOfXml(xml: string, expr: string, scratchPath: string): Promise<string> {
  await writeFile(scratchPath, xml);
  try {
    return await xpath(scratchPath, expr);
  } finally {
    await rm(scratchPath, { force: true });
  }
}
