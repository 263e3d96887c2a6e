import { runBatch } from '../batch.js';

await runBatch(5, 8);
