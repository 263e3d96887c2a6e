import { runBatch } from '../batch.js';

await runBatch(8, 8);
