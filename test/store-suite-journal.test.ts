/**
 * The store suite (test/store-suite.ts) on the journal, and on a journal that compacts as soon as it holds a few bytes.
 */
import { storeSuite } from './store-suite.js';

storeSuite('journal', 'journal, compacting early');
