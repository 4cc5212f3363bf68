import type { Caller } from '../core/caller.ts';
import type { Core } from '../core/core.ts';
import type { JobEventHub } from '../core/eventHub.ts';

/** Built per request (HTTP) or per subscription (WebSocket), after the token was checked. */
export interface GraphQLContext {
  caller: Caller;
  core: Core;
  hub: JobEventHub;
  /** The HTTP request, when there is one (not over WebSocket): its headers carry identity too. */
  request?: Request;
}
