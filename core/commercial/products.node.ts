/**
 * Loads the product matrix: the file named by PRODUCTS_FILE, or the default shipped beside this module
 * (core/commercial/products.default.json, compiled into the build). Validated once, at start.
 */
import fs from 'node:fs';
import defaultMatrix from './products.default.json';
import { ProductMatrix, productMatrixSchema } from './products';

export function loadProductMatrix(file: string | undefined): ProductMatrix {
  let raw: unknown = defaultMatrix;
  const source = file ?? 'core/commercial/products.default.json';
  if (file) {
    try {
      raw = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      throw new Error(`PRODUCTS_FILE=${file}: cannot read it as JSON (${(err as Error).message})`);
    }
  }
  const parsed = productMatrixSchema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      `${source} is not a valid product matrix: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`
    );
  }
  return parsed.data;
}
