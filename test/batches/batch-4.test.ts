import { runBatch } from '../batch.js';

await runBatch(4, 8);
