import { runBatch } from '../batch.js';

await runBatch(1, 8);
