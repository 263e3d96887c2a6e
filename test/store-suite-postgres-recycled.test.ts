/** The store suite (test/store-suite.ts) on PostgreSQL, the driver's pool replaced every 3 queries. */
import { storeSuite } from './store-suite.js';

storeSuite('postgres, pool replaced every 3 queries');
