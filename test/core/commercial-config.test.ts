/** The commercial and memory gateways' configuration: the product matrix file and where memory calls go. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, memoryGatewayUrl } from '../../core/config.node';
import { loadProductMatrix } from '../../core/commercial/products.node';

describe('product matrix', () => {
  it('the shipped default is valid', () => {
    const matrix = loadProductMatrix(undefined);
    expect(matrix).toMatchObject({ version: 'V1.0' });
    expect(matrix.matrix_name.length).toBeGreaterThan(0);
    expect(matrix.products.length).toBeGreaterThan(0);
  });

  it('PRODUCTS_FILE replaces it; a bad file stops the start naming the field', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'products-'));
    const good = path.join(dir, 'good.json');
    fs.writeFileSync(
      good,
      JSON.stringify({ matrix_name: 'm', version: '2', products: [{ id: 'p', name: 'P' }], region: 'cn' })
    );
    expect(loadProductMatrix(good)).toEqual({
      matrix_name: 'm',
      version: '2',
      products: [{ id: 'p', name: 'P' }],
      region: 'cn'
    });
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ matrix_name: 'm', products: [] }));
    expect(() => loadProductMatrix(bad)).toThrow(/version/);
    const notJson = path.join(dir, 'x.json');
    fs.writeFileSync(notJson, '{');
    expect(() => loadProductMatrix(notJson)).toThrow(/PRODUCTS_FILE/);
    expect(() => loadProductMatrix(path.join(dir, 'missing.json'))).toThrow(/PRODUCTS_FILE/);
  });
});

describe('memory gateway address', () => {
  it('binds to loopback by default, and the commercial gateway calls it there', () => {
    const config = loadConfig({ MEMORY_PORT: '9300' });
    expect(config.MEMORY_HOST).toBe('127.0.0.1');
    expect(config.MEMORY_GATEWAY_TIMEOUT_MS).toBe(5000);
    expect(memoryGatewayUrl(config)).toBe('http://127.0.0.1:9300');
  });

  it('follows MEMORY_HOST, and MEMORY_GATEWAY_URL wins', () => {
    expect(memoryGatewayUrl(loadConfig({ MEMORY_HOST: '0.0.0.0' }))).toBe('http://127.0.0.1:9120');
    expect(memoryGatewayUrl(loadConfig({ MEMORY_HOST: '10.0.0.5' }))).toBe('http://10.0.0.5:9120');
    expect(memoryGatewayUrl(loadConfig({ MEMORY_HOST: '::1' }))).toBe('http://[::1]:9120');
    expect(memoryGatewayUrl(loadConfig({ MEMORY_GATEWAY_URL: 'http://memory.internal:80/' }))).toBe(
      'http://memory.internal:80'
    );
    expect(() => loadConfig({ MEMORY_GATEWAY_URL: 'ftp://x' })).toThrow(/MEMORY_GATEWAY_URL/);
  });
});
