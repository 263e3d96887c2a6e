/** The store suite (test/store-suite.ts) on the memory store. */
import { storeSuite } from './store-suite.js';

storeSuite('memory');
