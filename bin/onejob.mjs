#!/usr/bin/env node
// The installed `onejob` command: loads the TypeScript CLI through tsx.
import { register } from 'tsx/esm/api';

register();
await import('../cli.ts');
