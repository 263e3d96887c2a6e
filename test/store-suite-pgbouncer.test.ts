/** The store suite (test/store-suite.ts) on PostgreSQL through pgbouncer in transaction pooling. */
import { storeSuite } from './store-suite.js';

storeSuite('postgres through pgbouncer, transaction pooling');
