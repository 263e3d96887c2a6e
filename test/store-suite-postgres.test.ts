/** The store suite (test/store-suite.ts) on PostgreSQL. */
import { storeSuite } from './store-suite.js';

storeSuite('postgres');
