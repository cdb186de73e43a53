/**
 * Makes sure the custom search attributes exist in the namespace (a real cluster does not get them from the dev
 * server's flags). Adds only the missing ones; lacking permission is logged, not fatal.
 */
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { Logger } from 'pino';
import type { TemporalConnectionSettings } from '../core/config.node';
import { SEARCH_ATTRIBUTES } from '../core/search-attributes';

export async function ensureSearchAttributes(
  reach: TemporalConnectionSettings,
  namespace: string,
  logger: Logger
): Promise<void> {
  const connection = await Connection.connect(reach);
  try {
    const existing = await connection.operatorService.listSearchAttributes({ namespace });
    const known = new Set(Object.keys(existing.customAttributes ?? {}));
    const missing = Object.keys(SEARCH_ATTRIBUTES).filter((name) => !known.has(name));
    if (missing.length === 0) return;
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(
        missing.map((name) => [
          name,
          {
            Keyword: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
            KeywordList: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            Int: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT
          }[SEARCH_ATTRIBUTES[name]!]
        ])
      )
    });
    logger.info({ added: missing }, 'registered search attributes');
  } catch (err) {
    logger.warn(
      { err },
      'could not register search attributes; workflows that set them will fail until an operator adds them'
    );
  } finally {
    await connection.close();
  }
}
