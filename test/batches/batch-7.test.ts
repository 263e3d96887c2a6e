import { runBatch } from '../batch.js';

await runBatch(7, 8);
