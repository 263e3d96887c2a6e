import { runBatch } from '../batch.js';

await runBatch(2, 8);
