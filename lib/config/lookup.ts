/**
 * Looking up what a request names in the providers file: the one place an unknown image key is
 * refused, naming the request's field and the keys the entry has.
 */
import { ProxySpecError } from './errors.ts';
import type { ImageConfig, ProviderEntry } from './schema.ts';

/**
 * The image `key` of `entry`; a ProxySpecError naming `field` (the request's name for the key:
 * `imageKey` in a proxy spec, `key` in an image warm) and the known keys when there is none.
 */
export function imageOf(entry: ProviderEntry, key: string, field = 'imageKey'): ImageConfig {
  const image = Object.hasOwn(entry.images, key) ? entry.images[key] : undefined;
  if (image === undefined) {
    const known = Object.keys(entry.images).join(', ');
    throw new ProxySpecError(field, `entry ${entry.name} has no image ${JSON.stringify(key)} (known: ${known})`);
  }
  return image;
}
