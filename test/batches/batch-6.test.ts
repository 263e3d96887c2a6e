import { runBatch } from '../batch.js';

await runBatch(6, 8);
