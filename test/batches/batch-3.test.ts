import { runBatch } from '../batch.js';

await runBatch(3, 8);
